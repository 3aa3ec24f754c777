// Encoder / Decoder: the payload encoding of wire frames.
//
// Little-endian fixed-width integers (common/coding.h); strings and byte
// strings as a u32 length followed by the bytes; vectors as a u32 count
// followed by the elements. The Decoder is bounds-checked: every read checks
// the remaining length first, lengths are checked against what is left before
// anything is allocated, and the first failure latches (ok() false, later reads
// fail). Neither class is thread-safe; both are cheap, single-use values.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "common/coding.h"

namespace stripefs::rpc {

class Encoder {
 public:
  explicit Encoder(std::vector<uint8_t>* out) : out_(out) {}

  void U8(uint8_t v) { out_->push_back(v); }
  void U16(uint16_t v) { coding::PutLe(out_, v); }
  void U32(uint32_t v) { coding::PutLe(out_, v); }
  void U64(uint64_t v) { coding::PutLe(out_, v); }
  void I32(int32_t v) { U32(static_cast<uint32_t>(v)); }
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void Bool(bool v) { U8(v ? 1 : 0); }
  void Bytes(std::span<const uint8_t> b) {
    U32(static_cast<uint32_t>(b.size()));
    out_->insert(out_->end(), b.begin(), b.end());
  }
  void String(std::string_view s) {
    Bytes(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()),
                                   s.size()));
  }

 private:
  std::vector<uint8_t>* out_;
};

class Decoder {
 public:
  explicit Decoder(std::span<const uint8_t> in) : in_(in) {}

  bool ok() const { return in_.ok(); }
  size_t remaining() const { return in_.remaining(); }
  // True when everything was consumed without error.
  bool Done() const { return in_.Done(); }
  // Marks the input malformed (e.g. a value out of range).
  bool Fail() { return in_.Fail(); }

  bool U8(uint8_t* v) { return in_.ReadLe(v); }
  bool U16(uint16_t* v) { return in_.ReadLe(v); }
  bool U32(uint32_t* v) { return in_.ReadLe(v); }
  bool U64(uint64_t* v) { return in_.ReadLe(v); }
  bool I32(int32_t* v) {
    uint32_t u;
    if (!in_.ReadLe(&u)) return false;
    *v = static_cast<int32_t>(u);
    return true;
  }
  bool I64(int64_t* v) {
    uint64_t u;
    if (!in_.ReadLe(&u)) return false;
    *v = static_cast<int64_t>(u);
    return true;
  }
  bool Bool(bool* v) {
    uint8_t b;
    if (!U8(&b)) return false;
    if (b > 1) return Fail();
    *v = b != 0;
    return true;
  }
  bool Bytes(std::vector<uint8_t>* out) {
    std::span<const uint8_t> s;
    if (!Span(&s)) return false;
    out->assign(s.begin(), s.end());
    return true;
  }
  bool String(std::string* out) {
    std::span<const uint8_t> s;
    if (!Span(&s)) return false;
    out->assign(reinterpret_cast<const char*>(s.data()), s.size());
    return true;
  }
  // A length-prefixed byte string as a view into the input.
  bool Span(std::span<const uint8_t>* out) {
    uint32_t n;
    if (!U32(&n)) return false;
    return in_.ReadBytes(n, out);
  }
  // Reads a vector count; fails if even `min_elem_bytes` per element
  // cannot fit in what is left (so no count can make us allocate much).
  bool Count(uint32_t* n, size_t min_elem_bytes) {
    if (!U32(n)) return false;
    if (min_elem_bytes == 0) min_elem_bytes = 1;
    if (*n > remaining() / min_elem_bytes) return Fail();
    return true;
  }

 private:
  coding::ByteReader in_;
};

// Overloads for plain values, used by the message codecs (wire_messages.h).
inline void Put(Encoder& e, uint8_t v) { e.U8(v); }
inline void Put(Encoder& e, uint16_t v) { e.U16(v); }
inline void Put(Encoder& e, uint32_t v) { e.U32(v); }
inline void Put(Encoder& e, uint64_t v) { e.U64(v); }
inline void Put(Encoder& e, int32_t v) { e.I32(v); }
inline void Put(Encoder& e, int64_t v) { e.I64(v); }
inline void Put(Encoder& e, bool v) { e.Bool(v); }
inline void Put(Encoder& e, const std::string& v) { e.String(v); }
inline void Put(Encoder& e, const std::vector<uint8_t>& v) { e.Bytes(v); }

inline bool Get(Decoder& d, uint8_t* v) { return d.U8(v); }
inline bool Get(Decoder& d, uint16_t* v) { return d.U16(v); }
inline bool Get(Decoder& d, uint32_t* v) { return d.U32(v); }
inline bool Get(Decoder& d, uint64_t* v) { return d.U64(v); }
inline bool Get(Decoder& d, int32_t* v) { return d.I32(v); }
inline bool Get(Decoder& d, int64_t* v) { return d.I64(v); }
inline bool Get(Decoder& d, bool* v) { return d.Bool(v); }
inline bool Get(Decoder& d, std::string* v) { return d.String(v); }
inline bool Get(Decoder& d, std::vector<uint8_t>* v) { return d.Bytes(v); }

// Smallest wire size of one T, to bound vector counts before decoding.
template <typename T>
constexpr size_t MinWireSize() {
  if constexpr (std::is_integral_v<T>)
    return sizeof(T);
  else
    return 1;
}

}  // namespace stripefs::rpc
