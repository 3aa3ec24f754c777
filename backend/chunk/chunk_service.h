// ChunkService: what a chunk server offers to clients.
//
// A chunk is one of the k+m cells of a stripe, identified by (inode, stripe,
// index) and a version. Versions are globally unique (allocated by the
// metadata service), so writes of different versions never collide; a chunk
// version, once written, is immutable. Implemented in process by ChunkStore
// (a local directory) and remotely by the RPC client stub; the stripe client
// sees only this interface.
//
// Thread-safety: every implementation is safe to call from many threads.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

namespace stripefs {

struct ChunkId {
  uint64_t inode = 0;
  uint64_t stripe = 0;
  uint32_t index = 0;  // 0..k-1 data, k..k+m-1 parity

  friend bool operator==(const ChunkId&, const ChunkId&) = default;
  friend auto operator<=>(const ChunkId&, const ChunkId&) = default;
};

// One version of one chunk (a batched delete names many).
struct ChunkVersion {
  ChunkId id;
  uint64_t version = 0;

  friend bool operator==(const ChunkVersion&, const ChunkVersion&) = default;
};

struct ChunkInfo {
  ChunkId id;
  uint64_t version = 0;
  uint32_t length = 0;  // bytes stored
  uint32_t crc32c = 0;  // CRC32C of the whole chunk
};

struct ChunkStoreStats {
  uint64_t chunks = 0;
  uint64_t bytes_stored = 0;
  uint64_t bytes_free = 0;  // free space on the store's file system
  // Size of that file system, the part of bytes_free the store keeps in
  // reserve (writes get ENOSPC below it), and the file system's id (statvfs
  // f_fsid): stores with the same (host, fs_id) share their free space.
  uint64_t bytes_capacity = 0;
  uint64_t bytes_reserved = 0;
  uint64_t fs_id = 0;
  uint64_t crc_errors = 0;  // reads that failed verification since start
  uint64_t writes = 0;
  uint64_t reads = 0;
};

// One byte range [offset, offset + length) of a multi-range patch.
struct PatchRange {
  uint32_t offset = 0;
  uint32_t length = 0;

  friend bool operator==(const PatchRange&, const PatchRange&) = default;
};

// EINVAL (naming the first bad range) unless `ranges` are non-empty each,
// sorted, disjoint, inside a `length`-byte chunk, and their lengths add up
// to `bytes`. An empty list is valid when `bytes` is 0.
inline Status CheckPatchRanges(std::span<const PatchRange> ranges,
                               uint32_t length, uint64_t bytes) {
  uint64_t prev_end = 0, sum = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const PatchRange& r = ranges[i];
    const uint64_t end = uint64_t{r.offset} + r.length;
    if (r.length == 0 || end > length || (i > 0 && r.offset < prev_end)) {
      return Status::InvalidArgument(
          "patch range " + std::to_string(i) + " [" + std::to_string(r.offset) +
          ", " + std::to_string(end) +
          ") is empty, out of order, overlapping or past the chunk's " +
          std::to_string(length) + " bytes");
    }
    prev_end = end;
    sum += r.length;
  }
  if (sum != bytes) {
    return Status::InvalidArgument("patch ranges cover " + std::to_string(sum) +
                                   " bytes, " + std::to_string(bytes) +
                                   " bytes given");
  }
  return Status::Ok();
}

// Copies each of `ranges` (accepted by CheckPatchRanges) from the next bytes
// of `bytes` (range order) into `out`, which holds the chunk's bytes from
// chunk offset `out_offset` on and covers every range.
inline void ScatterPatchRanges(std::span<const PatchRange> ranges,
                               std::span<const uint8_t> bytes,
                               uint32_t out_offset, std::span<uint8_t> out) {
  size_t at = 0;
  for (const PatchRange& r : ranges) {
    std::copy_n(bytes.begin() + static_cast<ptrdiff_t>(at), r.length,
                out.begin() + static_cast<ptrdiff_t>(r.offset - out_offset));
    at += r.length;
  }
}

// One chunk write of a batch (ChunkService::ApplyChunkOps): a whole new
// version (kWrite: `bytes` is the chunk), a copy of `from_version`
// (kClone), or a copy with some bytes replaced (kPatch): with `ranges`
// empty, [offset, offset + bytes.size()); else each of `ranges` (sorted,
// disjoint), whose new bytes are `bytes` concatenated in range order
// (PatchChunkRanges). `bytes` and `ranges` are borrowed for the duration
// of the call.
struct ChunkWriteOp {
  enum class Kind : uint32_t { kWrite = 0, kClone = 1, kPatch = 2 };
  Kind kind = Kind::kWrite;
  ChunkId id;
  uint64_t from_version = 0;  // kClone, kPatch
  uint64_t to_version = 0;
  uint32_t length = 0;  // kClone, kPatch: the new version's length
  uint32_t offset = 0;  // kPatch with `ranges` empty
  std::span<const uint8_t> bytes;
  std::span<const PatchRange> ranges = {};  // kPatch: several ranges
};

// One read of a batch (ChunkService::ReadChunkRanges): bytes
// [offset, offset + out.size()) of chunk (id, version) into `out`, which
// is borrowed for the duration of the call.
struct ChunkRangeRead {
  ChunkId id;
  uint64_t version = 0;
  uint32_t offset = 0;
  std::span<uint8_t> out;
};

class ChunkService {
 public:
  virtual ~ChunkService() = default;

  // Stores `data` as chunk (id, version). Durable (data and index synced)
  // before OK. Writing an existing (id, version) again with identical length
  // replaces it (repair rewrites). Errors: ENOSPC when the disk is full
  // (nothing half-written remains visible), EIO, EHOSTDOWN when unreachable.
  virtual Status WriteChunk(const ChunkId& id, uint64_t version,
                            std::span<const uint8_t> data) = 0;

  // Reads [offset, offset+length) of chunk (id, version). The stored CRC is
  // verified; a mismatch returns EBADMSG (Status::Corruption) and is counted,
  // never data. ENOENT when that version is absent. A range past the end is
  // EINVAL.
  virtual Result<std::vector<uint8_t>> ReadChunk(const ChunkId& id,
                                                 uint64_t version,
                                                 uint32_t offset,
                                                 uint32_t length) = 0;

  // ReadChunk into the caller's buffer (e.g. a FUSE reply): reads
  // [offset, offset + out.size()) with the same checks and errors. On error
  // `out` holds unspecified bytes. The default copies from ReadChunk; a
  // store overrides it to read in place, with no heap buffer per read.
  virtual Status ReadChunkInto(const ChunkId& id, uint64_t version,
                               uint32_t offset, std::span<uint8_t> out) {
    if (out.size() > UINT32_MAX) {
      return Status::InvalidArgument("chunk read of " +
                                     std::to_string(out.size()) +
                                     " bytes is larger than any chunk");
    }
    auto data =
        ReadChunk(id, version, offset, static_cast<uint32_t>(out.size()));
    if (!data.ok()) return data.status();
    if (data->size() != out.size()) {
      return Status::Corruption("chunk read returned " +
                                std::to_string(data->size()) + " of " +
                                std::to_string(out.size()) + " bytes");
    }
    std::copy(data->begin(), data->end(), out.begin());
    return Status::Ok();
  }

  // ReadChunkInto that gives up with ETIMEDOUT at `deadline` and has then
  // stopped touching `out`, so a caller may run it on its own thread with
  // the reply buffer as `out` rather than on a pool thread it can abandon.
  // NotSupported (the default) when reads cannot be bounded.
  virtual Status ReadChunkIntoBy(
      const ChunkId& id, uint64_t version, uint32_t offset,
      std::span<uint8_t> out, std::chrono::steady_clock::time_point deadline) {
    (void)id;
    (void)version;
    (void)offset;
    (void)out;
    (void)deadline;
    return Status::NotSupported("bounded ReadChunkInto");
  }

  // ReadChunkInto only if it can be done without blocking: no lock wait, no
  // disk I/O (index and bytes already in memory), no network call. Either
  // the bytes are in `out` (OK, checked as ReadChunkInto does), or
  // WouldBlock (EAGAIN) and the caller reads some other way (`out` then
  // holds unspecified bytes), or a definite error (e.g. ENOENT, EINVAL).
  // For callers on threads that must not wait (a FUSE io-uring queue
  // thread). The default (a remote service, or one that cannot tell)
  // returns WouldBlock.
  virtual Status TryReadChunkInto(const ChunkId& id, uint64_t version,
                                  uint32_t offset, std::span<uint8_t> out) {
    (void)id;
    (void)version;
    (void)offset;
    (void)out;
    return Status::WouldBlock("non-blocking chunk read");
  }

  // Several reads at once (e.g. every old window one fsync's parity deltas
  // need from this server) and one Status per read, in order, each with
  // ReadChunkInto's checks and errors; on error that read's `out` holds
  // unspecified bytes. Reads are independent: one failing does not stop
  // the others. Bounded by `deadline` (time_point::max(): unbounded): a
  // read still running then gives up with ETIMEDOUT, and a service that
  // cannot bound reads answers EOPNOTSUPP for each (the caller reads some
  // other way). The default reads them one after another
  // (ReadChunkIntoBy, or ReadChunkInto when unbounded); the RPC stub sends
  // them as one request per frame's worth, so a batch costs one round
  // trip.
  virtual std::vector<Status> ReadChunkRanges(
      std::span<const ChunkRangeRead> reads,
      std::chrono::steady_clock::time_point deadline) {
    const bool bounded =
        deadline != std::chrono::steady_clock::time_point::max();
    std::vector<Status> out;
    out.reserve(reads.size());
    for (const ChunkRangeRead& r : reads) {
      out.push_back(
          bounded ? ReadChunkIntoBy(r.id, r.version, r.offset, r.out, deadline)
                  : ReadChunkInto(r.id, r.version, r.offset, r.out));
    }
    return out;
  }

  // Deletes every stored version of `id` except `keep_version` (0 = delete
  // all). Deleting what is absent is OK.
  virtual Status DeleteChunk(const ChunkId& id, uint64_t keep_version) = 0;

  // Lists stored chunks in (inode, stripe, index, version) order starting
  // strictly after `after` (pass a default ChunkInfo to start), at most
  // `limit` entries; an empty result means the end. For scrub and repair.
  virtual Result<std::vector<ChunkInfo>> ListChunks(const ChunkInfo& after,
                                                    uint32_t limit) = 0;

  virtual Result<ChunkStoreStats> Stats() = 0;

  // Deletes exactly (id, version); deleting what is absent is OK. Used to
  // remove the chunks of a write that lost its commit race. The default says
  // the operation is unsupported (callers then leave the chunk to scrub).
  virtual Status DeleteChunkVersion(const ChunkId& id, uint64_t version) {
    (void)id;
    (void)version;
    return Status::NotSupported("DeleteChunkVersion");
  }

  // Deletes exactly each (id, version) of `chunks`, like DeleteChunkVersion
  // (absent ones are OK), in one request and, where the store can, one
  // durable index commit. Used by the version collector and the purge of
  // unlinked files, one call per server. The default tries every entry one
  // by one and returns the first error.
  virtual Status DeleteChunkVersions(std::span<const ChunkVersion> chunks) {
    Status first = Status::Ok();
    for (const ChunkVersion& c : chunks) {
      Status st = DeleteChunkVersion(c.id, c.version);
      if (first.ok() && !st.ok()) first = st;
    }
    return first;
  }

  // Makes (id, to_version) a copy of (id, from_version), whose length is
  // `length`. Used by parity-delta updates, where untouched chunks carry over
  // to the stripe's new version. The default reads and rewrites the chunk
  // (CRC verified on the way); a store may override it with a cheaper local
  // copy (e.g. a hard link, versions being immutable).
  virtual Status CloneChunk(const ChunkId& id, uint64_t from_version,
                            uint64_t to_version, uint32_t length) {
    auto data = ReadChunk(id, from_version, 0, length);
    if (!data.ok()) return data.status();
    return WriteChunk(id, to_version, *data);
  }

  // Makes (id, to_version) a copy of (id, from_version), whose length is
  // `length`, with [offset, offset + bytes.size()) replaced by `bytes`. Used
  // by parity-delta updates, which then move only the changed byte ranges of
  // the touched data chunks and of the parity chunks instead of whole chunks.
  // The source is CRC-verified (EBADMSG when corrupt, ENOENT when absent); a
  // range past `length` is EINVAL. The default runs where the store is (in
  // process, or on the chunk server behind the RPC stub).
  virtual Status PatchChunk(const ChunkId& id, uint64_t from_version,
                            uint64_t to_version, uint32_t length,
                            uint32_t offset, std::span<const uint8_t> bytes) {
    if (uint64_t{offset} + bytes.size() > length) {
      return Status::InvalidArgument(
          "patch of [" + std::to_string(offset) + ", " +
          std::to_string(uint64_t{offset} + bytes.size()) +
          ") is past the chunk's " + std::to_string(length) + " bytes");
    }
    auto data = ReadChunk(id, from_version, 0, length);
    if (!data.ok()) return data.status();
    std::copy(bytes.begin(), bytes.end(), data->begin() + offset);
    return WriteChunk(id, to_version, *data);
  }

  // Makes (id, to_version) a copy of (id, from_version), whose length is
  // `length`, with each of `ranges` replaced by the next bytes of `bytes`
  // (range order): ONE new version however many ranges. EINVAL unless
  // CheckPatchRanges accepts them; otherwise the errors of PatchChunk. Used
  // by parity deltas whose parity changes at several column intervals. The
  // default: one range is PatchChunk; several read the whole source
  // (CRC-verified), apply them, and WriteChunk the result.
  virtual Status PatchChunkRanges(const ChunkId& id, uint64_t from_version,
                                  uint64_t to_version, uint32_t length,
                                  std::span<const PatchRange> ranges,
                                  std::span<const uint8_t> bytes) {
    STRIPEFS_RETURN_IF_ERROR(CheckPatchRanges(ranges, length, bytes.size()));
    if (ranges.size() <= 1) {
      return PatchChunk(id, from_version, to_version, length,
                        ranges.empty() ? 0 : ranges[0].offset, bytes);
    }
    auto data = ReadChunk(id, from_version, 0, length);
    if (!data.ok()) return data.status();
    if (data->size() != length) {
      return Status::Corruption("chunk read returned " +
                                std::to_string(data->size()) + " of " +
                                std::to_string(length) + " bytes");
    }
    ScatterPatchRanges(ranges, bytes, 0, *data);
    return WriteChunk(id, to_version, *data);
  }

  // Runs one op of a batch through WriteChunk, CloneChunk, PatchChunk or
  // PatchChunkRanges (EINVAL for an unknown kind).
  Status ApplyChunkOp(const ChunkWriteOp& op) {
    switch (op.kind) {
      case ChunkWriteOp::Kind::kWrite:
        return WriteChunk(op.id, op.to_version, op.bytes);
      case ChunkWriteOp::Kind::kClone:
        return CloneChunk(op.id, op.from_version, op.to_version, op.length);
      case ChunkWriteOp::Kind::kPatch:
        if (!op.ranges.empty()) {
          return PatchChunkRanges(op.id, op.from_version, op.to_version,
                                  op.length, op.ranges, op.bytes);
        }
        return PatchChunk(op.id, op.from_version, op.to_version, op.length,
                          op.offset, op.bytes);
    }
    return Status::InvalidArgument(
        "unknown chunk op kind " +
        std::to_string(static_cast<uint32_t>(op.kind)));
  }

  // Carries out every op of `ops` (chunk writes of many stripes for one
  // server, e.g. one fsync's wave) and returns one Status per op, in
  // order; each op is durable when its Status is OK, and ops are
  // independent (one failing does not undo or stop the others). Ops
  // naming the same (id, to_version) twice are not allowed. The default
  // runs the ops at the same time, at most kApplyChunkOpsThreads at once,
  // so that a store's group commit takes them in as few sync rounds as it
  // can; the RPC stub sends them in one request per frame's worth.
  static constexpr size_t kApplyChunkOpsThreads = 32;
  virtual std::vector<Status> ApplyChunkOps(std::span<const ChunkWriteOp> ops) {
    std::vector<Status> out(ops.size());
    if (ops.size() == 1) {
      out[0] = ApplyChunkOp(ops[0]);
      return out;
    }
    for (size_t at = 0; at < ops.size(); at += kApplyChunkOpsThreads) {
      const size_t end = std::min(ops.size(), at + kApplyChunkOpsThreads);
      std::vector<std::thread> threads;
      threads.reserve(end - at);
      for (size_t i = at; i < end; ++i)
        threads.emplace_back([&, i] { out[i] = ApplyChunkOp(ops[i]); });
      for (auto& t : threads) t.join();
    }
    return out;
  }
};

}  // namespace stripefs
