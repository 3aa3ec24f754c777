// Preparing the chunk store's writes up to the group commit: clones,
// patches (chunk_patch.h does the window arithmetic) and ApplyChunkOps'
// batched ops.
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
#include "backend/chunk/chunk_patch.h"
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

using chunk_patch::BytesPerBlock;
using chunk_patch::PatchWindows;
using chunk_patch::PiecesOutside;
using chunk_patch::ScatterIntoWindows;

Status ChunkStore::GatherForTarget(uint64_t to_version, uint32_t length,
                                   const char* verb, CommitOp* op,
                                   bool* existed) {
  *existed = false;
  std::shared_ptr<const ChunkVersions> cached;
  ChunkVersions scanned;
  STRIPEFS_RETURN_IF_ERROR(VersionsOf(op->id, &cached, &scanned));
  const ChunkVersions& all = cached ? *cached : scanned;
  for (const auto& [ver, val] : all) {
    if (ver != to_version) continue;
    *existed = true;
    if (val.length != length) {
      return Status::Exists(
          std::string("cannot ") + verb + " to " +
          DescribeChunk(op->id, to_version) + ": it is already stored with " +
          std::to_string(val.length) + " bytes, not " + std::to_string(length));
    }
  }
  // A new version lets nothing go, and ApplyLive counts only its fresh
  // extent: the other versions (copies of every piece and block CRC) are
  // needed only when it replaces one.
  if (!*existed) return Status::Ok();
  for (const auto& [ver, val] : all) {
    if (ver != to_version) {
      op->others.push_back(val);
    } else {
      op->freed.push_back({to_version, val});
    }
  }
  return Status::Ok();
}

Status ChunkStore::PrepareClone(const ChunkId& id, uint64_t from_version,
                                uint64_t to_version, uint32_t length,
                                CommitOp* op, bool* existed, Prep* prep) {
  *prep = Prep::kDefault;
  ChunkIndexValue v;
  STRIPEFS_RETURN_IF_ERROR(
      GetSourceEntry(id, from_version, length, "clone", &v));
  if (length != v.length || !v.in_segment) return Status::Ok();
  STRIPEFS_RETURN_IF_ERROR(CheckSpace(0));
  // Shares the source's pieces without reading them: versions are
  // immutable, and a corrupt piece is found by whoever reads either
  // version (and by scrub), never hidden.
  *prep = Prep::kReady;
  op->id = id;
  op->keys = {EncodeChunkKey(id, to_version)};
  op->value = std::move(v);
  return GatherForTarget(to_version, length, "clone", op, existed);
}

Status ChunkStore::ReadPartlyCoveredBlocks(
    const ChunkId& id, uint64_t from_version, uint64_t to_version,
    const ChunkIndexValue& v, std::span<const PatchRange> ranges,
    const std::vector<PatchRange>& windows, AlignedBytes* data) {
  const uint64_t block = uint64_t{1} << v.block_shift;
  const std::vector<uint32_t> covered = BytesPerBlock(ranges, windows, block);
  size_t at = 0, bi = 0;
  for (const PatchRange& w : windows) {
    // Runs of blocks that need the source's bytes, one read each.
    const uint64_t we = uint64_t{w.offset} + w.length;
    auto read_run = [&](uint64_t lo, uint64_t hi) -> Status {
      Status rs = ReadVerifiedRange(
          id, from_version, v, static_cast<uint32_t>(lo),
          std::span<uint8_t>(data->data() + at + (lo - w.offset), hi - lo));
      return rs.Annotate("patching " + DescribeChunk(id, to_version) +
                         " from " + DescribeChunk(id, from_version));
    };
    uint64_t run = we;  // first block of the current run; `we`: none
    for (uint64_t b = w.offset; b < we; b += block, ++bi) {
      if (covered[bi] != std::min<uint64_t>(block, we - b)) {
        if (run == we) run = b;
      } else if (run != we) {
        STRIPEFS_RETURN_IF_ERROR(read_run(run, b));
        run = we;
      }
    }
    if (run != we) STRIPEFS_RETURN_IF_ERROR(read_run(run, we));
    at += w.length;
  }
  return Status::Ok();
}

namespace {

// The block CRCs of the new windows (back to back in `data`) over the
// source's in value->block_crcs, and the whole chunk's CRC from them.
void SetWindowCrcs(const std::vector<PatchRange>& windows,
                   const AlignedBytes& data, ChunkIndexValue* value) {
  const uint64_t block = uint64_t{1} << value->block_shift;
  size_t at = 0;
  for (const PatchRange& w : windows) {
    const std::vector<uint32_t> fresh =
        ComputeBlockCrcs(data.data() + at, w.length, value->block_shift);
    std::copy(
        fresh.begin(), fresh.end(),
        value->block_crcs.begin() + static_cast<ptrdiff_t>(w.offset / block));
    at += w.length;
  }
  value->crc32c =
      CombineBlockCrcs(value->block_crcs, value->length, value->block_shift);
}

}  // namespace

Status ChunkStore::PreparePatch(const ChunkId& id, uint64_t from_version,
                                uint64_t to_version, uint32_t length,
                                std::span<const PatchRange> ranges,
                                std::span<const uint8_t> bytes, CommitOp* op,
                                AlignedBytes* data, bool* existed, Prep* prep) {
  *prep = Prep::kReady;
  ChunkIndexValue v;
  STRIPEFS_RETURN_IF_ERROR(
      GetSourceEntry(id, from_version, length, "patch", &v));
  // The windows (a block is at least a segment unit here, so each new
  // piece starts aligned), and the source's pieces without them.
  const uint64_t block = uint64_t{1} << v.block_shift;
  const std::vector<PatchRange> windows = PatchWindows(ranges, block, length);
  if (windows.empty()) {
    *prep = Prep::kDefault;  // nothing to patch: callers make it a clone
    return Status::Ok();
  }
  uint64_t total = 0;
  for (const PatchRange& w : windows) total += w.length;
  std::vector<ChunkPiece> kept;
  if (v.in_segment) kept = PiecesOutside(v.pieces, windows);
  const bool whole = length != v.length || !v.in_segment ||
                     block < kSegmentAlign || total * 2 > length ||
                     kept.size() + windows.size() > kMaxChunkPieces;
  if (whole) {
    *prep = Prep::kDefault;
    return Status::Ok();
  }
  if (Status sp = CheckSpace(total); !sp.ok()) {
    *prep = Prep::kNoSpace;
    return sp;
  }
  // The windows' blocks back to back (page aligned, so the segment write
  // needs no staging copy): first the source's bytes of every block the
  // ranges cover only in part (read and verified), then the ranges' bytes.
  data->resize(total);
  STRIPEFS_RETURN_IF_ERROR(ReadPartlyCoveredBlocks(id, from_version, to_version,
                                                   v, ranges, windows, data));
  ScatterIntoWindows(ranges, bytes, windows, data->data());
  op->id = id;
  op->keys = {EncodeChunkKey(id, to_version)};
  op->has_data = true;
  op->data = *data;
  op->windows = windows;
  op->kept_pieces = std::move(kept);
  op->value.length = length;
  op->value.block_shift = v.block_shift;
  op->value.block_crcs = v.block_crcs;
  SetWindowCrcs(windows, *data, &op->value);
  op->value.in_segment = true;
  return GatherForTarget(to_version, length, "patch", op, existed);
}

Status ChunkStore::PrepareWholePatch(const ChunkWriteOp& w, BatchOp* b,
                                     Prep* prep) {
  *prep = Prep::kDefault;
  ChunkIndexValue v;
  bool found = false;
  STRIPEFS_RETURN_IF_ERROR(GetEntry(w.id, w.from_version, &found, &v));
  // A resize, a legacy source, a missing one or a full store: the one-op
  // path, which reports or compacts. `length` comes from a peer: nothing
  // is allocated until the source is found to be that long.
  if (!found || !v.in_segment || v.length != w.length ||
      w.length > options_.max_chunk_bytes || !CheckSpace(w.length).ok()) {
    return Status::Ok();
  }
  b->data.resize(w.length);
  const std::span<uint8_t> chunk(b->data.data(), w.length);
  if (!ReadVerifiedRange(w.id, w.from_version, v, 0, chunk).ok()) {
    return Status::Ok();  // the one-op path reads it again and says why
  }
  if (w.ranges.empty()) {
    std::memcpy(chunk.data() + w.offset, w.bytes.data(), w.bytes.size());
  } else {
    ScatterPatchRanges(w.ranges, w.bytes, 0, chunk);
  }
  *prep = Prep::kReady;
  b->whole = true;
  counters_.patches_whole.fetch_add(1, std::memory_order_relaxed);
  InitWriteOp(w.id, w.to_version, chunk, &b->op);
  return GatherForTarget(w.to_version, w.length, "patch", &b->op, &b->existed);
}

Status ChunkStore::PrepareBatchOp(const ChunkWriteOp& w, BatchOp* b,
                                  Prep* prep) {
  *prep = Prep::kDefault;
  switch (w.kind) {
    case ChunkWriteOp::Kind::kWrite:
      if (w.to_version == 0 || w.bytes.size() > options_.max_chunk_bytes ||
          !CheckSpace(w.bytes.size()).ok()) {
        return Status::Ok();  // WriteChunk's errors, or it compacts first
      }
      *prep = Prep::kReady;
      InitWriteOp(w.id, w.to_version, w.bytes, &b->op);
      return GatherForTarget(w.to_version,
                             static_cast<uint32_t>(w.bytes.size()), "write",
                             &b->op, &b->existed);
    case ChunkWriteOp::Kind::kClone:
      if (w.to_version == 0 || w.to_version == w.from_version) {
        return Status::Ok();
      }
      return PrepareClone(w.id, w.from_version, w.to_version, w.length, &b->op,
                          &b->existed, prep);
    case ChunkWriteOp::Kind::kPatch:
      break;
  }
  if (w.to_version == 0 || w.to_version == w.from_version || w.bytes.empty() ||
      (!w.ranges.empty() &&
       !CheckPatchRanges(w.ranges, w.length, w.bytes.size()).ok())) {
    return Status::Ok();
  }
  if (w.ranges.empty() && uint64_t{w.offset} + w.bytes.size() > w.length) {
    return Status::Ok();
  }
  const PatchRange one{w.offset, static_cast<uint32_t>(w.bytes.size())};
  Status ps = PreparePatch(
      w.id, w.from_version, w.to_version, w.length,
      w.ranges.empty() ? std::span<const PatchRange>(&one, 1) : w.ranges,
      w.bytes, &b->op, &b->data, &b->existed, prep);
  // Most of the chunk: a whole new version, in this batch too.
  if (ps.ok() && *prep == Prep::kDefault) return PrepareWholePatch(w, b, prep);
  return ps;
}

}  // namespace stripefs
