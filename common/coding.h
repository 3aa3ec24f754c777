// coding: the one byte codec for fixed-width integers in stored and wire
// formats.
//
// - PutLe / PutBe append an unsigned integer to a std::string or a
//   std::vector<uint8_t>; StoreLe / StoreBe write it at a pointer. Little-
//   endian is the wire and record order; big-endian is for RocksDB keys,
//   whose bytewise order must equal numeric order.
// - LoadLe / LoadBe read at a pointer: the caller has checked the length
//   (fixed-size headers). Anything of variable length goes through
//   ByteReader.
// - ByteReader is a bounds-checked cursor over input bytes: every read checks
//   what is left first, never reads past the end, and the first failure
//   latches (ok() false, every later read fails and leaves its output
//   untouched). ReadBytes returns views into the input, so the input must
//   outlive them.
// Byte-by-byte shifts, so results do not depend on host order or alignment.
// Pure functions and single-use values; a ByteReader is not thread-safe.
// - PrefixEnd gives the exclusive upper bound of the keys that start with a
//   prefix (a RocksDB iterate_upper_bound, an etcd range end).
// No varints: no format uses them.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace stripefs::coding {

// An output buffer PutLe/PutBe can append to.
template <typename T>
concept ByteSink =
    std::same_as<T, std::string> || std::same_as<T, std::vector<uint8_t>>;

template <std::unsigned_integral T>
void StoreLe(uint8_t* p, T v) {
  for (size_t i = 0; i < sizeof(T); ++i)
    p[i] = static_cast<uint8_t>(v >> (8 * i));
}

template <std::unsigned_integral T>
void StoreBe(uint8_t* p, T v) {
  for (size_t i = 0; i < sizeof(T); ++i)
    p[i] = static_cast<uint8_t>(v >> (8 * (sizeof(T) - 1 - i)));
}

template <std::unsigned_integral T>
T LoadLe(const uint8_t* p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    v |= static_cast<T>(T{p[i]} << (8 * i));
  return v;
}

template <std::unsigned_integral T>
T LoadBe(const uint8_t* p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    v |= static_cast<T>(T{p[i]} << (8 * (sizeof(T) - 1 - i)));
  return v;
}

// Overloads for char buffers (std::string keys and values).
template <std::unsigned_integral T>
T LoadLe(const char* p) {
  return LoadLe<T>(reinterpret_cast<const uint8_t*>(p));
}
template <std::unsigned_integral T>
T LoadBe(const char* p) {
  return LoadBe<T>(reinterpret_cast<const uint8_t*>(p));
}

// Grow, then store in place: a range insert at end() went through the
// general insert path (~3 % of a chunkd's CPU encoding index values).
template <std::unsigned_integral T, ByteSink Out>
void PutLe(Out* out, T v) {
  const size_t at = out->size();
  out->resize(at + sizeof(T));
  StoreLe(reinterpret_cast<uint8_t*>(out->data()) + at, v);
}

template <std::unsigned_integral T, ByteSink Out>
void PutBe(Out* out, T v) {
  const size_t at = out->size();
  out->resize(at + sizeof(T));
  StoreBe(reinterpret_cast<uint8_t*>(out->data()) + at, v);
}

class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> in) : in_(in) {}
  explicit ByteReader(std::string_view in)
      : in_(reinterpret_cast<const uint8_t*>(in.data()), in.size()) {}

  bool ok() const { return ok_; }
  size_t remaining() const { return in_.size() - pos_; }
  // True when everything was consumed without error.
  bool Done() const { return ok_ && pos_ == in_.size(); }
  // Marks the input malformed (e.g. a value out of range); returns false.
  bool Fail() {
    ok_ = false;
    return false;
  }

  template <std::unsigned_integral T>
  bool ReadLe(T* v) {
    if (!Need(sizeof(T))) return false;
    *v = LoadLe<T>(in_.data() + pos_);
    pos_ += sizeof(T);
    return true;
  }
  template <std::unsigned_integral T>
  bool ReadBe(T* v) {
    if (!Need(sizeof(T))) return false;
    *v = LoadBe<T>(in_.data() + pos_);
    pos_ += sizeof(T);
    return true;
  }
  // The next n bytes, as a view into the input.
  bool ReadBytes(size_t n, std::span<const uint8_t>* out) {
    if (!Need(n)) return false;
    *out = in_.subspan(pos_, n);
    pos_ += n;
    return true;
  }
  bool ReadBytes(size_t n, std::string_view* out) {
    std::span<const uint8_t> s;
    if (!ReadBytes(n, &s)) return false;
    *out = std::string_view(reinterpret_cast<const char*>(s.data()), s.size());
    return true;
  }
  bool Skip(size_t n) {
    if (!Need(n)) return false;
    pos_ += n;
    return true;
  }

 private:
  bool Need(size_t n) {
    if (!ok_ || remaining() < n) return Fail();
    return true;
  }

  std::span<const uint8_t> in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

// The smallest key greater than every key starting with `prefix` (the last
// byte that is not 0xff, incremented; "" when every byte is 0xff).
inline std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto last = static_cast<uint8_t>(end.back());
    if (last != 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return end;
}

}  // namespace stripefs::coding
