#include "backend/client/chunk_fanout.h"

#include <map>
#include <string>

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
  return Reduce(indices, errs, error);
}

uint32_t ChunkFanout::Reduce(const std::vector<int>& indices,
                             const std::vector<Status>& errs, Status* error) {
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

namespace {

// One server's answers (`got`, one per item of `mine`) into their places
// in `out`; items it did not answer get an error naming `what`.
void Scatter(std::vector<Status> got, const std::vector<size_t>& mine,
             const char* what, std::vector<Status>* out) {
  for (size_t n = 0; n < mine.size(); ++n) {
    (*out)[mine[n]] =
        n < got.size()
            ? std::move(got[n])
            : Status::IoError("chunk service answered " +
                              std::to_string(got.size()) + " statuses for " +
                              std::to_string(mine.size()) + " " + what);
  }
}

}  // namespace

std::vector<Status> ChunkFanout::RunBatch(std::span<const BatchOp> ops) {
  std::vector<Status> out(ops.size());
  // The ops per server, in op order.
  std::map<ChunkService*, std::vector<size_t>> by_server;
  std::vector<std::function<void()>> tasks;
  for (size_t j = 0; j < ops.size(); ++j) {
    ChunkService* svc = ops[j].layout->Usable(ops[j].op.id.index, &out[j]);
    if (svc == nullptr) continue;
    if (ops[j].op.kind == ChunkWriteOp::Kind::kWrite) {
      // A whole chunk: its own WriteChunk call, sent straight from the
      // caller's buffer (a batch would copy it into one frame).
      tasks.push_back(
          [&ops, &out, svc, j] { out[j] = svc->ApplyChunkOp(ops[j].op); });
      continue;
    }
    by_server[svc].push_back(j);
  }
  for (auto& entry : by_server) {
    tasks.push_back([&ops, &out, &entry] {
      ChunkService* svc = entry.first;
      const std::vector<size_t>& mine = entry.second;
      std::vector<ChunkWriteOp> batch;
      batch.reserve(mine.size());
      for (size_t j : mine) batch.push_back(ops[j].op);
      Scatter(svc->ApplyChunkOps(batch), mine, "chunk ops", &out);
    });
  }
  pool_->RunAll(std::move(tasks));
  return out;
}

std::vector<Status> ChunkFanout::ReadBatch(
    std::span<const BatchRead> reads,
    std::chrono::steady_clock::time_point deadline) {
  std::vector<Status> out(reads.size());
  // The reads per server, in read order.
  std::map<ChunkService*, std::vector<size_t>> by_server;
  for (size_t j = 0; j < reads.size(); ++j)
    by_server[reads[j].svc].push_back(j);
  std::vector<std::function<void()>> tasks;
  for (auto& entry : by_server) {
    tasks.push_back([&reads, &out, &entry, deadline] {
      const std::vector<size_t>& mine = entry.second;
      std::vector<ChunkRangeRead> batch;
      batch.reserve(mine.size());
      for (size_t j : mine) batch.push_back(reads[j].read);
      Scatter(entry.first->ReadChunkRanges(batch, deadline), mine,
              "chunk reads", &out);
    });
  }
  pool_->RunAll(std::move(tasks));
  return out;
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
