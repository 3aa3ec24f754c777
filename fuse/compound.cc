#include "fuse/compound.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>

#include "fuse/opcode_table.h"

namespace stripefs::fuse {

using namespace fuse_abi;  // NOLINT: wire names

namespace {

CompoundDecode Refuse(std::string reason) {
  CompoundDecode d;
  d.error = EINVAL;
  d.reason = "COMPOUND: " + std::move(reason);
  return d;
}

}  // namespace

bool AllowedInCompound(uint32_t opcode) {
  if (opcode == FUSE_COMPOUND || opcode == FUSE_DESTROY) return false;
  const OpcodeRow* row = FindOpcode(opcode);
  return row && row->handler && row->reply == ReplyRule::kAlways &&
         !row->before_init;
}

CompoundDecode DecodeCompound(std::span<const uint8_t> arg0,
                              std::span<const uint8_t> rest,
                              const ParseOptions& opts) {
  if (arg0.size() != sizeof(fuse_compound_in))
    return Refuse("header has " + std::to_string(arg0.size()) +
                  " bytes, want " + std::to_string(sizeof(fuse_compound_in)));
  CompoundDecode d;
  std::memcpy(&d.in, arg0.data(), sizeof(d.in));
  if (d.in.count == 0) return Refuse("count 0");
  if (d.in.count > FUSE_MAX_COMPOUND_OPS)
    return Refuse("count " + std::to_string(d.in.count) + " exceeds " +
                  std::to_string(FUSE_MAX_COMPOUND_OPS));
  d.subs.reserve(d.in.count);
  std::span<const uint8_t> left = rest;
  for (uint32_t i = 0; i < d.in.count; ++i) {
    const std::string at = "sub-request " + std::to_string(i) + ": ";
    if (left.size() < sizeof(fuse_in_header))
      return Refuse(at + "truncated (" + std::to_string(left.size()) +
                    " bytes left, header needs " +
                    std::to_string(sizeof(fuse_in_header)) + ")");
    fuse_in_header h;
    std::memcpy(&h, left.data(), sizeof(h));
    if (h.len < sizeof(fuse_in_header) || h.len > left.size())
      return Refuse(at + "len " + std::to_string(h.len) + " outside " +
                    std::to_string(sizeof(fuse_in_header)) + ".." +
                    std::to_string(left.size()));
    if (!AllowedInCompound(h.opcode))
      return Refuse(at + "opcode " + std::to_string(h.opcode) + " (" +
                    std::string(OpcodeName(h.opcode)) +
                    ") may not be inside a compound");
    SplitResult sp = SplitDevBuffer(left.first(h.len), opts);
    if (sp.error != 0) return Refuse(at + sp.reason);
    d.subs.push_back(sp.raw);
    left = left.subspan(h.len);
  }
  if (!left.empty())
    return Refuse(std::to_string(left.size()) +
                  " bytes after the last sub-request");
  return d;
}

std::vector<uint8_t> EncodeCompoundReply(
    std::span<const CompoundSubReply> subs) {
  size_t total = sizeof(fuse_compound_out);
  for (const auto& s : subs) total += sizeof(fuse_out_header) + s.payload.size();
  std::vector<uint8_t> out(total);
  fuse_compound_out co{};
  co.count = static_cast<uint32_t>(subs.size());
  std::memcpy(out.data(), &co, sizeof(co));
  size_t pos = sizeof(co);
  for (const auto& s : subs) {
    fuse_out_header oh{};
    oh.len = static_cast<uint32_t>(sizeof(oh) + s.payload.size());
    oh.error = -s.error;
    oh.unique = s.unique;
    std::memcpy(out.data() + pos, &oh, sizeof(oh));
    pos += sizeof(oh);
    if (!s.payload.empty())
      std::memcpy(out.data() + pos, s.payload.data(), s.payload.size());
    pos += s.payload.size();
  }
  return out;
}

namespace {

class CompoundRun;

// The transport side of one sub-request: its reply lands in the run.
class SubInFlight final : public InFlight {
 public:
  SubInFlight(CompoundRun* run, size_t index) : run_(run), index_(index) {}
  void Complete(int error, std::span<const iovec> payload) override;
  std::span<uint8_t> ScratchBuffer(size_t n) override {
    scratch_.resize(n);
    return scratch_;
  }

 private:
  CompoundRun* run_;
  size_t index_;
  std::vector<uint8_t> scratch_;
};

class CompoundRun {
 public:
  CompoundRun(Replier parent, size_t n)
      : parent_(std::move(parent)), replies_(n), remaining_(n + 1) {
    subs_.reserve(n);
    for (size_t i = 0; i < n; ++i)
      subs_.push_back(std::make_unique<SubInFlight>(this, i));
  }
  SubInFlight* sub(size_t i) { return subs_[i].get(); }
  CompoundSubReply& reply(size_t i) { return replies_[i]; }

  // One sub-reply stored (or the dispatcher finished): the last one answers
  // the compound and frees the run.
  void Release() {
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    std::vector<uint8_t> body = EncodeCompoundReply(replies_);
    Replier parent = std::move(parent_);
    delete this;
    parent.Data(std::span<const uint8_t>(body));
  }

 private:
  Replier parent_;
  std::vector<CompoundSubReply> replies_;
  std::vector<std::unique_ptr<SubInFlight>> subs_;
  std::atomic<size_t> remaining_;
};

void SubInFlight::Complete(int error, std::span<const iovec> payload) {
  CompoundSubReply& r = run_->reply(index_);
  // A no-reply answer cannot happen for the opcodes allowed inside; keep
  // the slot well-formed anyway.
  r.error = error == kNoReply ? EIO : error;
  if (r.error == 0) {
    for (const iovec& v : payload) {
      const auto* p = static_cast<const uint8_t*>(v.iov_base);
      r.payload.insert(r.payload.end(), p, p + v.iov_len);
    }
  }
  run_->Release();  // may delete this SubInFlight: nothing after it
}

}  // namespace

void RunCompound(Replier parent, const RequestContext& base,
                 CompoundDecode d, const CompoundDispatch& dispatch) {
  auto* run = new CompoundRun(std::move(parent), d.subs.size());
  for (size_t i = 0; i < d.subs.size(); ++i) {
    const fuse_in_header& h = d.subs[i].header;
    run->reply(i).unique = h.unique;
    RequestContext& c = run->sub(i)->ctx;
    c = base;
    c.SetFromHeader(h);
    c.background = false;
    c.must_not_block = false;
    c.retried = false;
  }
  // `remaining` counts the dispatcher too, so a sub-request answered at once
  // cannot free the run while later ones are still being dispatched.
  for (size_t i = 0; i < d.subs.size(); ++i) dispatch(run->sub(i), d.subs[i]);
  run->Release();
}

}  // namespace stripefs::fuse
