#include "backend/client/chunk_fanout.h"

#include "backend/client/stripe_geometry.h"

namespace stripefs {

void KeepWorseError(Status* kept, const Status& st) {
  if (st.ok()) return;
  if (kept->ok() || st.code() == ENOSPC ||
      (kept->code() == EHOSTDOWN && st.code() != ENOSPC)) {
    *kept = st;
  }
}

uint32_t ChunkFanout::Run(const ChunkLayout& layout,
                          const std::vector<int>& indices, const ChunkOp& op,
                          Status* error) {
  std::vector<Status> errs(indices.size());
  std::vector<std::function<void()>> tasks;
  for (size_t j = 0; j < indices.size(); ++j) {
    tasks.push_back([&, j] {
      const auto i = static_cast<uint32_t>(indices[j]);
      ChunkService* svc = layout.Usable(i, &errs[j]);
      if (svc == nullptr) return;
      errs[j] = op(svc, i);
    });
  }
  pool_->RunAll(std::move(tasks));
  uint32_t failed = 0;
  bool transport_error = false;
  for (size_t j = 0; j < indices.size(); ++j) {
    if (errs[j].ok()) continue;
    failed |= ChunkBit(static_cast<uint32_t>(indices[j]));
    ClientCounters::Add(counters_->chunk_write_errors);
    KeepWorseError(error, errs[j]);
    transport_error |=
        errs[j].code() == EHOSTDOWN || errs[j].code() == ETIMEDOUT;
  }
  if (transport_error) view_->RequestRefresh();
  return failed;
}

uint32_t ChunkFanout::WriteChunks(
    uint64_t ino, uint64_t stripe, uint64_t version, const ChunkLayout& layout,
    const std::vector<std::pair<int, std::span<const uint8_t>>>& chunks,
    Status* error) {
  std::vector<int> indices;
  std::vector<std::span<const uint8_t>> by_index(layout.servers.size());
  for (const auto& [i, bytes] : chunks) {
    indices.push_back(i);
    by_index[static_cast<size_t>(i)] = bytes;
  }
  return Run(
      layout, indices,
      [&](ChunkService* svc, uint32_t i) {
        return svc->WriteChunk({ino, stripe, i}, version, by_index[i]);
      },
      error);
}

void ChunkFanout::DeleteVersion(uint64_t ino, uint64_t stripe, uint64_t version,
                                const ChunkLayout& layout, uint32_t mask) {
  const auto n = static_cast<uint32_t>(layout.servers.size());
  for (uint32_t i = 0; i < n; ++i) {
    ChunkService* svc = layout.services[i];
    if (!(mask & ChunkBit(i)) || svc == nullptr) continue;
    Status st = svc->DeleteChunkVersion({ino, stripe, i}, version);
    // Unsupported or failed: the chunk is an orphan that scrub collects.
    ClientCounters::Add(st.ok() ? counters_->gc_chunk_deletes
                                : counters_->gc_errors);
  }
}

}  // namespace stripefs
