// The chunk store's read path: read planning, batched file reads, CRC
// checks (see chunk_read.h).
#include "backend/chunk/chunk_read.h"

#include <fcntl.h>
#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>

#include "backend/chunk/chunk_index.h"
#include "backend/chunk/chunk_index_codec.h"
#include "backend/chunk/chunk_paths.h"
#include "backend/chunk/chunk_store.h"
#include "backend/chunk/chunk_version_cache.h"
#include "backend/chunk/group_commit.h"
#include "backend/chunk/uring_file_io.h"
#include "common/buffer_pool.h"
#include "common/coding.h"
#include "common/rocks_glue.h"
#include "common/unique_fd.h"
#include "ec/crc32c.h"

namespace stripefs {

using chunk_paths::Log;

Result<ChunkLocation> ChunkStore::Locate(const ChunkId& id, uint64_t version,
                                         uint32_t at) {
  std::shared_lock<std::shared_mutex> chunk_lock(LockFor(id));
  bool found = false;
  ChunkIndexValue v;
  STRIPEFS_RETURN_IF_ERROR(GetEntry(id, version, &found, &v));
  if (!found) {
    return Status::NotFound(DescribeChunk(id, version) + " is not stored");
  }
  if (at != 0 && at >= v.length) {
    return Status::InvalidArgument("byte " + std::to_string(at) + " is past " +
                                   DescribeChunk(id, version));
  }
  ChunkLocation loc;
  loc.length = v.length - at;
  loc.in_segment = v.in_segment;
  loc.pieces = v.pieces.size();
  if (v.in_segment) {
    for (const ChunkPiece& p : v.pieces) {
      if (at < p.chunk_offset || at - p.chunk_offset >= p.length) continue;
      loc.path = dir_ + "/" + chunk_paths::kSegmentsName + "/" +
                 chunk_paths::SegmentFileName(p.segment);
      loc.offset = p.segment_offset + (at - p.chunk_offset);
      loc.length = p.length - (at - p.chunk_offset);
    }
  } else {
    loc.offset = at;
    loc.path = chunk_paths::LegacyChunkPath(data_dir_, id, version);
  }
  return loc;
}

Status ChunkStore::ReadVerified(const ChunkId& id, uint64_t version,
                                const ChunkIndexValue& v,
                                std::vector<uint8_t>* out) {
  out->resize(v.length);
  return ReadVerifiedRange(id, version, v, 0, *out);
}

Status ChunkStore::PlanRange(const ChunkId& id, uint64_t version,
                             const ChunkIndexValue& v, uint32_t offset,
                             std::span<uint8_t> out, RangeRead* rr) {
  rr->id = id;
  rr->version = version;
  rr->v = &v;
  rr->offset = offset;
  rr->out = out;
  const auto length = static_cast<uint32_t>(out.size());
  rr->by_blocks = v.block_shift != 0 && !(offset == 0 && length == v.length);
  rr->lo = 0;
  rr->hi = v.length;
  if (rr->by_blocks) {
    const uint64_t block = uint64_t{1} << v.block_shift;
    rr->lo = offset / block * block;
    rr->hi = std::min<uint64_t>(
        v.length, (uint64_t{offset} + length + block - 1) / block * block);
  }
  // Read straight into the caller's buffer when the verified range is the
  // asked one (the whole chunk, or whole CRC blocks); else the covered
  // blocks go to a bounce buffer and the asked bytes are copied out.
  rr->buf = out;
  if (rr->lo != offset || rr->hi != uint64_t{offset} + length) {
    rr->bounce.resize(rr->hi - rr->lo);
    rr->buf = rr->bounce;
  }
  if (!v.in_segment) return ReadLegacyRange(rr);
  return PlanSegmentReads(rr);
}

Status ChunkStore::ReadLegacyRange(RangeRead* rr) {
  const ChunkId& id = rr->id;
  const uint64_t version = rr->version;
  const ChunkIndexValue& v = *rr->v;
  const uint64_t lo = rr->lo;
  // A legacy file of exactly `length` bytes: read here, at once.
  const std::string path = chunk_paths::LegacyChunkPath(data_dir_, id, version);
  UniqueFd legacy_fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!legacy_fd.valid()) {
    int err = errno;
    if (err == ENOENT) return Status::NotFound(path + " is missing");
    return Status::FromErrno(err, "open " + path);
  }
  struct stat st;
  if (::fstat(legacy_fd.get(), &st) != 0) {
    return Status::FromErrno(errno, "fstat " + path);
  }
  if (static_cast<uint64_t>(st.st_size) != v.length) {
    crc_errors_.fetch_add(1, std::memory_order_relaxed);
    return Status::Corruption(
        DescribeChunk(id, version) + " in " + dir_ + ": data file " + path +
        " has " + std::to_string(st.st_size) + " bytes, the index says " +
        std::to_string(v.length) + "; treat the chunk as lost and repair it");
  }
  if (rr->buf.empty()) return Status::Ok();
  RangeReadIo io;
  io.read.len = rr->buf.size();
  io.read.got = io_->Read(legacy_fd.get(), rr->buf.data(), io.read.len, lo);
  io.at = lo;
  return CheckRangeRead(*rr, io, path);
}

Status ChunkStore::PlanSegmentReads(RangeRead* rr) {
  const uint64_t lo = rr->lo, hi = rr->hi;
  // One read per piece the range covers (two when it ends in a short
  // block that goes through the page cache, see kDirectReadMinBytes).
  for (const ChunkPiece& p : rr->v->pieces) {
    const uint64_t s = std::max<uint64_t>(lo, p.chunk_offset);
    const uint64_t e =
        std::min<uint64_t>(hi, uint64_t{p.chunk_offset} + p.length);
    if (s >= e) continue;
    std::shared_ptr<SegmentFile> seg = segments_->Get(p.segment);
    if (!seg) {
      return Status::NotFound(
          "segment " + dir_ + "/" + chunk_paths::kSegmentsName + "/" +
          chunk_paths::SegmentFileName(p.segment) + " is missing");
    }
    uint8_t* dst = rr->buf.data() + (s - lo);
    const uint64_t pos = p.segment_offset + (s - p.chunk_offset);
    const uint64_t n = e - s;
    // The aligned body of a large range: O_DIRECT through the segment's
    // write fd (the disk's DMA lands in `dst`; no page-cache copy, and
    // io_uring runs it without punting to a worker thread).
    uint64_t direct = 0;
    if (seg->direct && n >= kDirectReadMinBytes && pos % kSegmentAlign == 0 &&
        reinterpret_cast<uintptr_t>(dst) % kSegmentAlign == 0) {
      direct = n / kSegmentAlign * kSegmentAlign;
      RangeReadIo io;
      io.read.fd = seg->write_fd.get();
      io.read.buf = dst;
      io.read.len = direct;
      io.read.offset = pos;
      io.seg = seg;
      io.at = s;
      io.direct = true;
      rr->ios.push_back(std::move(io));
    }
    if (direct < n) {
      RangeReadIo io;
      io.read.fd = seg->buffered_fd.get();
      io.read.buf = dst + direct;
      io.read.len = n - direct;
      io.read.offset = pos + direct;
      io.seg = std::move(seg);
      io.at = s + direct;
      rr->ios.push_back(std::move(io));
    }
  }
  return Status::Ok();
}

void ChunkStore::RunRangeReads(std::span<RangeRead* const> rrs) {
  std::vector<UringFileIo::BatchIo> batch;
  for (const RangeRead* rr : rrs) {
    for (const RangeReadIo& io : rr->ios) batch.push_back(io.read);
  }
  io_->RunBatch(batch);
  size_t at = 0;
  for (RangeRead* rr : rrs) {
    for (RangeReadIo& io : rr->ios) io.read.got = std::move(batch[at++].got);
  }
}

Status ChunkStore::CheckRangeRead(const RangeRead& rr, const RangeReadIo& io,
                                  const std::string& path) {
  if (!io.read.got.ok()) {
    Status e = io.read.got.status().Annotate("reading " + path);
    // ENOENT here cannot mean "data missing" to the caller.
    return e.code() == ENOENT ? Status::IoError(e.message()) : e;
  }
  if (*io.read.got != io.read.len) {
    crc_errors_.fetch_add(1, std::memory_order_relaxed);
    return Status::Corruption(DescribeChunk(rr.id, rr.version) + " in " + dir_ +
                              ": " + path + " ended after " +
                              std::to_string(io.at + *io.read.got) +
                              " of its " + std::to_string(rr.v->length) +
                              " bytes; treat the chunk as lost and "
                              "repair it");
  }
  return Status::Ok();
}

Status ChunkStore::FinishRange(RangeRead* rr) {
  const ChunkIndexValue& v = *rr->v;
  for (RangeReadIo& io : rr->ios) {
    if (io.direct) {
      if (io.read.got.ok() || io.read.got.status().code() != EINVAL) {
        if (io.read.got.ok() && *io.read.got == io.read.len) {
          counters_.direct_read_bytes.fetch_add(io.read.len,
                                                std::memory_order_relaxed);
        }
      } else {
        // Alignment the device refuses: the page cache.
        io.read.fd = io.seg->buffered_fd.get();
        io.read.got =
            io_->Read(io.read.fd, io.read.buf, io.read.len, io.read.offset);
      }
    }
    STRIPEFS_RETURN_IF_ERROR(CheckRangeRead(*rr, io, io.seg->path));
  }
  // Where chunk byte `at` is, for messages.
  auto where = [&](uint64_t at) -> std::string {
    if (!v.in_segment) {
      return "file " +
             chunk_paths::LegacyChunkPath(data_dir_, rr->id, rr->version) +
             " at " + std::to_string(at);
    }
    for (const ChunkPiece& p : v.pieces) {
      if (at >= p.chunk_offset && at - p.chunk_offset < p.length) {
        return "file " + dir_ + "/" + chunk_paths::kSegmentsName + "/" +
               chunk_paths::SegmentFileName(p.segment) + " at " +
               std::to_string(p.segment_offset + (at - p.chunk_offset));
      }
    }
    return "no piece";
  };
  auto mismatch = [&](uint32_t stored, uint32_t computed,
                      const std::string& what, uint64_t at) {
    crc_errors_.fetch_add(1, std::memory_order_relaxed);
    char detail[128];
    std::snprintf(detail, sizeof(detail),
                  " (stored CRC32C 0x%08x, computed 0x%08x), ", stored,
                  computed);
    return Status::Corruption(DescribeChunk(rr->id, rr->version) + " in " +
                              dir_ + " failed CRC32C " + "verification of " +
                              what + detail + where(at) +
                              "; treat the chunk as lost and repair it");
  };
  const std::span<uint8_t> buf = rr->buf;
  if (rr->by_blocks) {
    const uint64_t block = uint64_t{1} << v.block_shift;
    for (uint64_t b = rr->lo / block; b * block < rr->hi; ++b) {
      const uint64_t start = b * block - rr->lo;
      const uint64_t n = std::min<uint64_t>(block, rr->hi - b * block);
      const uint32_t crc = ec::Crc32c(buf.data() + start, n);
      if (crc != v.block_crcs[b]) {
        return mismatch(v.block_crcs[b], crc, "block " + std::to_string(b),
                        b * block);
      }
    }
  } else {
    const uint32_t crc = ec::Crc32c(buf.data(), buf.size());
    if (crc != v.crc32c) return mismatch(v.crc32c, crc, "the whole chunk", 0);
  }
  if (!rr->bounce.empty() && !rr->out.empty()) {
    std::memcpy(rr->out.data(), rr->bounce.data() + (rr->offset - rr->lo),
                rr->out.size());
  }
  return Status::Ok();
}

Status ChunkStore::ReadVerifiedRange(const ChunkId& id, uint64_t version,
                                     const ChunkIndexValue& v, uint32_t offset,
                                     std::span<uint8_t> out) {
  RangeRead rr;
  STRIPEFS_RETURN_IF_ERROR(PlanRange(id, version, v, offset, out, &rr));
  RangeRead* one = &rr;
  RunRangeReads({&one, 1});
  return FinishRange(&rr);
}

Result<std::vector<uint8_t>> ChunkStore::ReadChunk(const ChunkId& id,
                                                   uint64_t version,
                                                   uint32_t offset,
                                                   uint32_t length) {
  std::vector<uint8_t> buf;
  STRIPEFS_RETURN_IF_ERROR(ReadRange(id, version, offset, length, [&] {
    buf.resize(length);
    return std::span<uint8_t>(buf);
  }));
  return buf;
}

Status ChunkStore::ReadChunkInto(const ChunkId& id, uint64_t version,
                                 uint32_t offset, std::span<uint8_t> out) {
  if (out.size() > UINT32_MAX) {
    return Status::InvalidArgument("chunk read of " +
                                   std::to_string(out.size()) +
                                   " bytes is larger than any chunk");
  }
  return ReadRange(id, version, offset, static_cast<uint32_t>(out.size()),
                   [out] { return out; });
}

Status ChunkStore::TryReadChunkInto(const ChunkId& id, uint64_t version,
                                    uint32_t offset, std::span<uint8_t> out) {
  if (out.size() > UINT32_MAX) {
    return Status::InvalidArgument("chunk read of " +
                                   std::to_string(out.size()) +
                                   " bytes is larger than any chunk");
  }
  std::shared_lock<std::shared_mutex> chunk_lock(LockFor(id), std::try_to_lock);
  if (!chunk_lock.owns_lock()) {
    return Status::WouldBlock("chunk is being changed");
  }
  ChunkIndexValue v;
  STRIPEFS_RETURN_IF_ERROR(LookUpRange(id, version, offset,
                                       static_cast<uint32_t>(out.size()), &v,
                                       /*cache_only=*/true));
  if (!v.in_segment) return Status::WouldBlock("legacy chunk file");
  RangeRead rr;
  Status ps = PlanRange(id, version, v, offset, out, &rr);
  // A missing segment: ReadChunkInto counts it and drops the entry.
  if (ps.code() == ENOENT) return Status::WouldBlock("segment missing");
  STRIPEFS_RETURN_IF_ERROR(ps);
  for (RangeReadIo& io : rr.ios) {
    // The page cache only, so the buffered fd also for what ReadChunkInto
    // would read O_DIRECT.
    io.direct = false;
    io.read.fd = io.seg->buffered_fd.get();
    io.read.got = UringFileIo::ReadIfCached(io.read.fd, io.read.buf,
                                            io.read.len, io.read.offset);
    if (!io.read.got.ok() && io.read.got.status().IsWouldBlock()) {
      return io.read.got.status();
    }
  }
  STRIPEFS_RETURN_IF_ERROR(FinishRange(&rr));
  reads_.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

Status ChunkStore::LookUpRange(const ChunkId& id, uint64_t version,
                               uint32_t offset, uint32_t length,
                               ChunkIndexValue* v, bool cache_only) {
  bool found = false;
  STRIPEFS_RETURN_IF_ERROR(GetEntry(id, version, &found, v, cache_only));
  if (!found) {
    return Status::NotFound(DescribeChunk(id, version) + " is not stored in " +
                            dir_);
  }
  if (static_cast<uint64_t>(offset) + length > v->length) {
    return Status::InvalidArgument(
        "read of [" + std::to_string(offset) + ", " +
        std::to_string(static_cast<uint64_t>(offset) + length) + ") of " +
        DescribeChunk(id, version) + " is past its end (" +
        std::to_string(v->length) + " bytes)");
  }
  return Status::Ok();
}

Status ChunkStore::ReadRange(const ChunkId& id, uint64_t version,
                             uint32_t offset, uint32_t length,
                             const std::function<std::span<uint8_t>()>& dest) {
  // For messages only: no string is built on the success path.
  auto name = [&] { return DescribeChunk(id, version); };
  std::shared_lock<std::shared_mutex> chunk_lock(LockFor(id));
  bool found = false;
  ChunkIndexValue v;
  STRIPEFS_RETURN_IF_ERROR(LookUpRange(id, version, offset, length, &v));
  Status vs = ReadVerifiedRange(id, version, v, offset, dest());
  if (vs.code() == ENOENT) {
    // Indexed but gone: drop the entry (exclusively; no other mutation of
    // this chunk can run in between, since mutations hold it exclusively).
    chunk_lock.unlock();
    std::unique_lock<std::shared_mutex> excl(LockFor(id));
    ChunkIndexValue again;
    Status gs = GetEntry(id, version, &found, &again);
    if (gs.ok() && found && EncodeChunkValue(again) != EncodeChunkValue(v)) {
      return Status::IoError("reading " + name() + " in " + dir_ +
                             " raced with a concurrent rewrite; retry");
    }
    if (!gs.ok() || !found) {
      return Status::NotFound(name() + " is not stored in " + dir_);
    }
    NoteMissing(id, version);
    Status st = DropEntry(id, version);
    if (!st.ok()) {
      Log(dir_, "cannot drop index entry of missing %s: %s", name().c_str(),
          st.ToString().c_str());
    }
    return Status::NotFound(name() + " is indexed in " + dir_ +
                            " but its data is missing (counted, entry "
                            "dropped); repair rebuilds it");
  }
  if (!vs.ok()) return vs;
  reads_.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

Status ChunkStore::ReadChunkIntoBy(
    const ChunkId& id, uint64_t version, uint32_t offset,
    std::span<uint8_t> out, std::chrono::steady_clock::time_point deadline) {
  if (std::chrono::steady_clock::now() >= deadline) {
    return Status(ETIMEDOUT, "reading " + DescribeChunk(id, version) + " in " +
                                 dir_ +
                                 ": the deadline passed before it started");
  }
  return ReadChunkInto(id, version, offset, out);
}

std::vector<Status> ChunkStore::ReadChunkRanges(
    std::span<const ChunkRangeRead> reads,
    std::chrono::steady_clock::time_point deadline) {
  std::vector<Status> out(reads.size());
  if (std::chrono::steady_clock::now() >= deadline) {
    for (Status& st : out) {
      st = Status(ETIMEDOUT, "reading chunks in " + dir_ +
                                 ": the deadline passed before they started");
    }
    return out;
  }
  // Every read's chunk lock, shared, each stripe once and in address order
  // (writers hold one chunk lock, or several in this order).
  std::vector<ChunkId> ids;
  ids.reserve(reads.size());
  for (const ChunkRangeRead& r : reads) ids.push_back(r.id);
  auto locks = LockInOrder<std::shared_lock<std::shared_mutex>>(ids);

  // Look every read up and plan it, then all their file reads at once.
  std::vector<ChunkIndexValue> values(reads.size());
  std::vector<RangeRead> rrs(reads.size());
  std::vector<RangeRead*> planned;
  planned.reserve(reads.size());
  std::vector<bool> data_missing(reads.size(), false);
  for (size_t i = 0; i < reads.size(); ++i) {
    const ChunkRangeRead& r = reads[i];
    if (r.out.size() > UINT32_MAX) {
      out[i] = Status::InvalidArgument("chunk read of " +
                                       std::to_string(r.out.size()) +
                                       " bytes is larger than any chunk");
      continue;
    }
    out[i] = LookUpRange(r.id, r.version, r.offset,
                         static_cast<uint32_t>(r.out.size()), &values[i]);
    if (!out[i].ok()) continue;
    out[i] = PlanRange(r.id, r.version, values[i], r.offset, r.out, &rrs[i]);
    if (out[i].ok()) {
      planned.push_back(&rrs[i]);
    } else {
      data_missing[i] = out[i].code() == ENOENT;
    }
  }
  RunRangeReads(planned);
  counters_.read_batches.fetch_add(1, std::memory_order_relaxed);
  for (size_t i = 0; i < reads.size(); ++i) {
    if (!out[i].ok()) continue;
    out[i] = FinishRange(&rrs[i]);
    if (out[i].ok()) reads_.fetch_add(1, std::memory_order_relaxed);
  }
  locks.clear();
  // Indexed but gone: the one-read path drops the entry (under the chunk
  // lock held exclusively) and says so.
  for (size_t i = 0; i < reads.size(); ++i) {
    if (data_missing[i]) {
      out[i] = ReadChunkInto(reads[i].id, reads[i].version, reads[i].offset,
                             reads[i].out);
    }
  }
  return out;
}

}  // namespace stripefs
