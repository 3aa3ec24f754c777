// StripeWriteExecutor's encoders: the bytes of a stripe's new version, by
// parity delta (MakeDelta: read the old windows, patch them) or by encoding
// whole cells (MakeEncoded: full stripe, new partial stripe, RMW), and
// their chunk ops sent on their own or with the wave (write_wave.h).
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "backend/client/stripe_write.h"
#include "backend/client/write_wave.h"

namespace stripefs {

namespace {

// The windows of a parity-delta write, chunk by chunk: a touched data
// cell's own, the parity windows for each parity chunk, none for an
// untouched cell. All of a chunk's windows are packed one after another in
// one buffer (packed_[i][w] = where window w starts there), which is also
// its patch's bytes. All chunks' buffers live in one allocation, not
// zero-filled: the reads fill every byte before anything uses it.
class DeltaWindows {
 public:
  DeltaWindows(const WritePlan& plan, uint32_t k, uint32_t m)
      : wins_(k + m, nullptr), packed_(k + m), chunk_(k + m), ranges_(k + m) {
    for (uint32_t i = 0; i < k; ++i)
      if (plan.touched & ChunkBit(i)) wins_[i] = &plan.cell_windows[i];
    for (uint32_t q = k; q < k + m; ++q) wins_[q] = &plan.parity_windows;
    std::vector<uint32_t> chunk_bytes(k + m, 0);
    for (uint32_t i = 0; i < k + m; ++i) {
      if (wins_[i] == nullptr) continue;
      for (const ColumnWindow& w : *wins_[i]) {
        packed_[i].push_back(chunk_bytes[i]);
        chunk_bytes[i] += w.hi - w.lo;
      }
      bytes_ += chunk_bytes[i];
    }
    buffer_.reset(new uint8_t[bytes_]);
    uint64_t at = 0;
    for (uint32_t i = 0; i < k + m; ++i) {
      if (wins_[i] == nullptr) continue;
      chunk_[i] = {buffer_.get() + at, chunk_bytes[i]};
      at += chunk_bytes[i];
      if (wins_[i]->size() > 1)
        for (const ColumnWindow& w : *wins_[i])
          ranges_[i].push_back({w.lo, w.hi - w.lo});
    }
  }

  // Every window's old bytes, read into its place.
  std::vector<StripeReader::WindowRead> Reads() const {
    std::vector<StripeReader::WindowRead> reads;
    for (uint32_t i = 0; i < wins_.size(); ++i) {
      if (wins_[i] == nullptr) continue;
      for (size_t w = 0; w < wins_[i]->size(); ++w) {
        const ColumnWindow& cw = (*wins_[i])[w];
        reads.push_back({i, cw.lo, cw.hi, chunk_[i].data() + packed_[i][w]});
      }
    }
    return reads;
  }
  uint64_t bytes() const { return bytes_; }
  // Where columns [lo, hi) of chunk i are in its packed buffer (the plan's
  // windows cover every touched column, so some window holds them; null if
  // none does).
  uint8_t* Locate(uint32_t i, uint32_t lo, uint32_t hi) const {
    if (wins_[i] == nullptr) return nullptr;
    const std::vector<ColumnWindow>& ws = *wins_[i];
    auto it = std::upper_bound(
        ws.begin(), ws.end(), lo,
        [](uint32_t x, const ColumnWindow& w) { return x < w.lo; });
    if (it == ws.begin() || (it - 1)->hi < hi) return nullptr;
    const size_t w = static_cast<size_t>(it - 1 - ws.begin());
    return chunk_[i].data() + packed_[i][w] + (lo - ws[w].lo);
  }

  // Chunk i's patch (or, when it has no windows, its clone) from version
  // `from` to `to` of `chunk_len` bytes: one window is a single-range patch,
  // several one multi-range patch (still one new version).
  ChunkWriteOp Op(const ChunkId& id, uint64_t from, uint64_t to,
                  uint32_t chunk_len) const {
    const uint32_t i = id.index;
    ChunkWriteOp op;
    op.id = id;
    op.from_version = from;
    op.to_version = to;
    op.length = chunk_len;
    if (wins_[i] == nullptr) {
      op.kind = ChunkWriteOp::Kind::kClone;
      return op;
    }
    op.kind = ChunkWriteOp::Kind::kPatch;
    op.bytes = chunk_[i];
    if (wins_[i]->size() == 1) {
      op.offset = wins_[i]->front().lo;
    } else {
      op.ranges = ranges_[i];
    }
    return op;
  }

 private:
  std::vector<const std::vector<ColumnWindow>*> wins_;  // plan's, or null
  std::vector<std::vector<uint32_t>> packed_;
  std::vector<std::span<uint8_t>> chunk_;        // chunk i's windows, packed
  std::vector<std::vector<PatchRange>> ranges_;  // multi-window patches
  uint64_t bytes_ = 0;
  std::unique_ptr<uint8_t[]> buffer_;
};

// Folds req's new bytes into the parity windows (UpdateParity from each
// cell's old bytes) and then over the cells' own windows, so both hold the
// new version's bytes.
Status ApplyDelta(const StripeGeometry& geo, const ec::Codec& codec,
                  const StripeWriteRequest& req, const DeltaWindows& windows) {
  const uint32_t k = geo.k(), m = geo.m();
  for (const StripeRange& r : req.ranges) {
    Status st;
    geo.ForEachCell(r.begin, r.end, geo.cell_size(), [&](const CellSpan& s) {
      if (!st.ok()) return;
      uint8_t* old_bytes = windows.Locate(s.cell, s.lo, s.hi);
      std::vector<uint8_t*> parity;
      for (uint32_t q = 0; q < m; ++q)
        parity.push_back(windows.Locate(k + q, s.lo, s.hi));
      if (old_bytes == nullptr || parity[0] == nullptr) {
        st = Status::InvalidArgument(
            "parity-delta plan has no window for columns [" +
            std::to_string(s.lo) + ", " + std::to_string(s.hi) + ") of cell " +
            std::to_string(s.cell));
        return;
      }
      const uint8_t* src = req.At(geo.StripeOffset(s.cell, s.lo));
      st = codec.UpdateParity(static_cast<int>(s.cell), old_bytes, src, parity,
                              s.hi - s.lo);
      std::memcpy(old_bytes, src, s.hi - s.lo);
    });
    STRIPEFS_RETURN_IF_ERROR(st);
  }
  return Status::Ok();
}

}  // namespace

Status StripeWriteExecutor::MakeDelta(Prepared* p, Status* write_error) {
  const StripeWriteRequest& req = *p->req;
  const uint32_t k = geo_.k(), m = geo_.m();
  const DeltaWindows windows(p->plan, k, m);
  // Old bytes of every window: with the wave's other stripes, one request
  // per server; else one parallel round (per 32 windows).
  STRIPEFS_RETURN_IF_ERROR(ReadDeltaWindows(p, windows.Reads()));
  ClientCounters::Add(p_.counters->rmw_bytes_read, windows.bytes());
  STRIPEFS_RETURN_IF_ERROR(ApplyDelta(geo_, *p_.codec, req, windows));
  // New version: patched windows of the touched data and parity chunks,
  // the untouched data chunks carried over by CloneChunk, all at once (one
  // group commit per server, not a patch round and then a clone round).
  std::vector<ChunkWriteOp> ops;
  for (uint32_t i = 0; i < k + m; ++i)
    ops.push_back(windows.Op({req.ino, req.stripe, i}, p->base.version,
                             p->version, p->plan.chunk_len));
  p->failed = SendOps(p, std::move(ops), write_error);
  return Status::Ok();
}

Status StripeWriteExecutor::MergeDataCells(
    Prepared* p, std::vector<BufferPool::Lease>* cells) {
  const StripeWriteRequest& req = *p->req;
  const WritePlan& plan = p->plan;
  const uint32_t k = geo_.k(), len = plan.chunk_len;
  for (uint32_t i = 0; i < k; ++i) cells->push_back(cell_pool_.Get());
  // Bytes no range covers are the old data (RMW: read straight into the
  // cells, degraded columns rebuilt there) or zeros (new stripe, truncate,
  // past a shorter old chunk).
  uint32_t old_len = 0;
  if (plan.kind == WriteKind::kRmw && p->base.chunk_len > 0) {
    old_len = std::min(p->base.chunk_len, len);
    std::vector<StripeReader::WindowRead> reads;
    for (uint32_t i = 0; i < k; ++i)
      reads.push_back({i, 0, old_len, (*cells)[i].data()});
    STRIPEFS_RETURN_IF_ERROR(
        p_.reader->ReadWindows(req.ino, p->base, p->layout, reads));
    ClientCounters::Add(p_.counters->rmw_bytes_read, uint64_t{k} * old_len);
  }
  for (uint32_t i = 0; i < k; ++i)
    std::memset((*cells)[i].data() + old_len, 0, len - old_len);
  // Merge the new bytes.
  for (const StripeRange& r : req.ranges) {
    geo_.ForEachCell(r.begin, r.end, len, [&](const CellSpan& s) {
      std::memcpy((*cells)[s.cell].data() + s.lo,
                  req.At(geo_.StripeOffset(s.cell, s.lo)), s.hi - s.lo);
    });
  }
  if (plan.zero_from != kNoTruncate) {
    for (uint32_t i = 0; i < k; ++i) {
      const uint64_t cell_start = geo_.StripeOffset(i, 0);
      if (plan.zero_from >= cell_start + len) continue;
      const uint64_t from =
          plan.zero_from > cell_start ? plan.zero_from - cell_start : 0;
      std::memset((*cells)[i].data() + from, 0, len - from);
    }
  }
  return Status::Ok();
}

Status StripeWriteExecutor::MakeEncoded(Prepared* p, Status* write_error) {
  // Reads nothing with the wave (an RMW reads whole cells on its own).
  if (p->wave != nullptr) p->wave->reads.Leave(p->member);
  const StripeWriteRequest& req = *p->req;
  const WritePlan& plan = p->plan;
  const uint32_t k = geo_.k(), m = geo_.m(), len = plan.chunk_len;
  // Parity (and, unless encoding in place, data) cells come from the pool:
  // no allocation, no page faults, no zero-fill of bytes Encode overwrites.
  std::vector<BufferPool::Lease> cells;
  std::vector<const uint8_t*> dptr;
  std::vector<uint8_t*> pptr;
  if (plan.kind == WriteKind::kFull && len == geo_.cell_size() &&
      req.origin == 0) {
    // A whole stripe is k contiguous cells of the request: encode in place.
    for (uint32_t i = 0; i < k; ++i)
      dptr.push_back(req.At(geo_.StripeOffset(i, 0)));
  } else {
    STRIPEFS_RETURN_IF_ERROR(MergeDataCells(p, &cells));
    for (const BufferPool::Lease& cell : cells) dptr.push_back(cell.data());
  }
  std::vector<BufferPool::Lease> parity;
  for (uint32_t q = 0; q < m; ++q) {
    parity.push_back(cell_pool_.Get());  // Encode writes every byte
    pptr.push_back(parity.back().data());
  }
  STRIPEFS_RETURN_IF_ERROR(p_.codec->Encode(dptr, pptr, len));
  std::vector<std::pair<int, std::span<const uint8_t>>> to_write;
  for (uint32_t i = 0; i < k; ++i)
    to_write.emplace_back(static_cast<int>(i),
                          std::span<const uint8_t>(dptr[i], len));
  for (uint32_t q = 0; q < m; ++q)
    to_write.emplace_back(static_cast<int>(k + q),
                          std::span<const uint8_t>(pptr[q], len));
  if (p->wave == nullptr) {
    p->failed = p_.fanout->WriteChunks(req.ino, req.stripe, p->version,
                                       p->layout, to_write, write_error);
    return Status::Ok();
  }
  std::vector<ChunkWriteOp> ops;
  for (const auto& [i, bytes] : to_write) {
    ChunkWriteOp op;
    op.kind = ChunkWriteOp::Kind::kWrite;
    op.id = {req.ino, req.stripe, static_cast<uint32_t>(i)};
    op.to_version = p->version;
    op.bytes = bytes;
    ops.push_back(op);
  }
  p->failed = SendOps(p, std::move(ops), write_error);
  return Status::Ok();
}

Status StripeWriteExecutor::ReadDeltaWindows(
    Prepared* p, std::span<const StripeReader::WindowRead> reads) {
  const StripeWriteRequest& req = *p->req;
  if (p->wave != nullptr) {
    std::vector<ChunkFanout::BatchRead> items;
    items.reserve(reads.size());
    for (const StripeReader::WindowRead& r : reads) {
      ChunkService* svc = p_.reader->DirectSource(p->base, p->layout, r.index);
      if (svc == nullptr) break;
      items.push_back({svc,
                       {ChunkId{req.ino, req.stripe, r.index}, p->base.version,
                        r.lo, std::span<uint8_t>(r.dst, r.hi - r.lo)}});
    }
    if (items.size() == reads.size()) {
      const std::vector<Status> got = p->wave->reads.Hand(p->member, items);
      if (std::all_of(got.begin(), got.end(),
                      [](const Status& st) { return st.ok(); }))
        return Status::Ok();
      // Read again below, around what failed.
    } else {
      p->wave->reads.Leave(p->member);
    }
  }
  return p_.reader->ReadWindows(req.ino, p->base, p->layout, reads);
}

}  // namespace stripefs
