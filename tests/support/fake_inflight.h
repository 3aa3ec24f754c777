// FakeInFlight: an InFlight that records the reply instead of sending it,
// so a Replier (and a RawFileSystem handler) can be driven without a
// transport. Header-only (users link the FUSE engine). Not thread-safe: one
// request at a time.
#pragma once

#include <string>
#include <vector>

#include "fuse/replier.h"
#include "fuse/transport.h"

namespace stripefs::testing {

struct RecordedReply {
  bool done = false;
  int error = 0;
  std::string body;
  const void* first_base = nullptr;  // iov_base of the first piece
  int given_back = 0;  // Replier::WouldBlock calls (GiveBack), not replies
};

class FakeInFlight : public fuse::InFlight {
 public:
  explicit FakeInFlight(RecordedReply* out, bool delete_on_complete = false)
      : out_(out), del_(delete_on_complete) {}
  void Complete(int error, std::span<const iovec> payload) override {
    out_->done = true;
    out_->error = error;
    out_->body.clear();
    out_->first_base = payload.empty() ? nullptr : payload[0].iov_base;
    for (const iovec& v : payload)
      out_->body.append(static_cast<const char*>(v.iov_base), v.iov_len);
    if (del_) delete this;
  }
  // Recorded; the request stays unanswered (the test dispatches it again,
  // as a transport would on a worker thread).
  void GiveBack() override { ++out_->given_back; }
  // Poisoned, like a transport buffer that held an earlier request: a
  // handler must write every byte it replies with.
  std::span<uint8_t> ScratchBuffer(size_t n) override {
    scratch_.assign(n, 0xEE);
    return scratch_;
  }

 private:
  RecordedReply* out_;
  bool del_;
  std::vector<uint8_t> scratch_;
};

}  // namespace stripefs::testing
