#include "backend/client/stripe_client.h"

#include <algorithm>

namespace stripefs {

namespace {

// Stripes of one Write() committed by one CommitStripes call: bounds the
// stripe locks held at once.
constexpr size_t kStripesPerCommit = 64;

}  // namespace

Result<std::unique_ptr<StripeClient>> StripeClient::Create(
    MetaService* meta, ChunkServerSet* servers,
    const StripeClientOptions& options) {
  auto geometry = meta->GetGeometry();
  if (!geometry.ok()) return geometry.status().Annotate("reading geometry");
  auto codec = ec::Codec::Create(static_cast<int>(geometry->k),
                                 static_cast<int>(geometry->m));
  if (!codec.ok()) return codec.status();
  std::unique_ptr<StripeClient> client(new StripeClient(
      meta, servers, *geometry, std::move(codec).value(), options));
  STRIPEFS_RETURN_IF_ERROR(client->RefreshClusterMap());
  return client;
}

StripeClient::StripeClient(MetaService* meta, ChunkServerSet* servers,
                           Geometry geometry, std::unique_ptr<ec::Codec> codec,
                           const StripeClientOptions& options)
    : meta_(meta),
      geometry_(geometry),
      geo_(geometry),
      codec_(std::move(codec)),
      options_(options),
      stripes_(options.read_cache_bytes, geo_.stripe_size()),
      pool_(options.io_threads) {
  view_ = std::make_unique<ClusterView>(
      meta, servers, geo_.width(), options.map_refresh_interval, &counters_);
  fanout_ = std::make_unique<ChunkFanout>(&pool_, view_.get(), &counters_);
  // Separate from pool_: a load waits for chunk reads that run on pool_.
  // One thread per stripe of the window (2..8): the loads of a sequential
  // reader's window run together, not two at a time.
  ahead_pool_ = std::make_unique<ThreadPool>(
      std::clamp<size_t>(options.read_ahead_stripes, 2, 8));
  reader_ = std::make_unique<StripeReader>(
      StripeReader::Parts{
          meta, codec_.get(), view_.get(), &pool_, &counters_, &maps_,
          options.read_cache_bytes ? &stripes_ : nullptr, ahead_pool_.get()},
      geo_, options.read_deadline, options.read_ahead_stripes);
  collector_ = std::make_unique<VersionCollector>(
      VersionCollector::Parts{meta, view_.get(), &pool_, &locks_, &counters_},
      options.gc_queue_stripes, options.gc_linger);
  StripeWriteOptions wo;
  wo.commit_retries = options.commit_retries;
  wo.parity_delta = options.parity_delta;
  wo.version_batch = options.version_batch;
  wo.refuse_degraded_enospc = options.refuse_degraded_enospc;
  degraded_ =
      std::make_unique<DegradedQueue>(this, &counters_, options.degraded_queue);
  writer_ = std::make_unique<StripeWriteExecutor>(
      StripeWriteExecutor::Parts{meta, codec_.get(), view_.get(), fanout_.get(),
                                 reader_.get(), &locks_, collector_.get(),
                                 &counters_, &maps_, &keep_file_times_,
                                 degraded_.get()},
      geo_, wo);
}

StripeClient::~StripeClient() {
  degraded_->Stop();
  ahead_pool_.reset();  // finishes the read-ahead loads
  writer_.reset();
  collector_.reset();  // drains queued deletions
}

Status StripeClient::Write(uint64_t ino, uint64_t offset,
                           std::span<const uint8_t> data, uint64_t size_cap) {
  std::vector<StripeWriteRequest> batch;
  Status st;
  geo_.ForEachStripe(
      offset, data.size(),
      [&](uint64_t s, uint32_t off, uint64_t pos, uint64_t n) {
        StripeWriteRequest req;
        req.ino = ino;
        req.stripe = s;
        req.bytes = data.subspan(pos, n);
        req.origin = off;
        req.ranges = {StripeRange{off, static_cast<uint32_t>(off + n)}};
        req.min_file_size = std::min(offset + pos + n, size_cap);
        batch.push_back(std::move(req));
        if (batch.size() == kStripesPerCommit && st.ok()) {
          st = writer_->WriteMany(batch);
          batch.clear();
        }
      });
  if (st.ok() && !batch.empty()) st = writer_->WriteMany(batch);
  // Committed stripes named their versions in maps_; after a failure the
  // map may have moved in ways the writer did not see.
  if (!st.ok()) maps_.Forget(ino);
  STRIPEFS_RETURN_IF_ERROR(st);
  ClientCounters::Add(counters_.bytes_written, data.size());
  return Status::Ok();
}

Status StripeClient::WriteStripe(uint64_t ino, uint64_t stripe,
                                 std::span<const uint8_t> stripe_bytes,
                                 const std::vector<StripeRange>& valid,
                                 uint64_t min_file_size) {
  StripeWriteRequest req;
  req.ino = ino;
  req.stripe = stripe;
  req.bytes = stripe_bytes;
  req.ranges = valid;
  req.min_file_size = min_file_size;
  Status st = writer_->Write(req);
  if (!st.ok()) maps_.Forget(ino);
  STRIPEFS_RETURN_IF_ERROR(st);
  uint64_t bytes = 0;
  for (const StripeRange& r : valid) bytes += r.end - r.begin;
  ClientCounters::Add(counters_.bytes_written, bytes);
  return Status::Ok();
}

Status StripeClient::WriteStripes(const std::vector<StripeWriteRequest>& reqs) {
  Status st;
  for (size_t i = 0; i < reqs.size() && st.ok(); i += kStripesPerCommit) {
    const auto end = reqs.begin() + static_cast<long>(std::min(
                                        reqs.size(), i + kStripesPerCommit));
    st = writer_->WriteMany(std::vector<StripeWriteRequest>(
        reqs.begin() + static_cast<long>(i), end));
  }
  if (!st.ok())
    for (const auto& r : reqs) maps_.Forget(r.ino);
  STRIPEFS_RETURN_IF_ERROR(st);
  uint64_t bytes = 0;
  for (const auto& r : reqs)
    for (const StripeRange& range : r.ranges) bytes += range.end - range.begin;
  ClientCounters::Add(counters_.bytes_written, bytes);
  return Status::Ok();
}

Result<size_t> StripeClient::Read(uint64_t ino, uint64_t offset,
                                  std::span<uint8_t> out, uint64_t file_size) {
  return reader_->Read(ino, offset, out, file_size);
}

Result<size_t> StripeClient::TryRead(uint64_t ino, uint64_t offset,
                                     std::span<uint8_t> out,
                                     uint64_t file_size) {
  return reader_->TryRead(ino, offset, out, file_size);
}

Result<InodeAttr> StripeClient::Truncate(uint64_t ino, uint64_t old_size,
                                         uint64_t new_size) {
  const uint64_t S = stripe_size();
  if (new_size < old_size && new_size % S != 0) {
    StripeWriteRequest req;
    req.ino = ino;
    req.stripe = new_size / S;
    req.zero_from = new_size % S;
    Status st = writer_->Write(req);
    maps_.Forget(ino);
    STRIPEFS_RETURN_IF_ERROR(st.Annotate("truncate"));
  }
  SetAttrRequest req;
  req.mask = kSetSize | (keep_file_times() ? kKeepTimes : 0u);
  req.size = new_size;
  std::vector<ObsoleteStripe> obsolete;
  auto attr = meta_->SetAttr(ino, req, &obsolete);
  maps_.Forget(ino);
  if (!attr.ok()) return attr.status();
  DeleteStripes(obsolete);
  return attr;
}

void StripeClient::DeleteStripes(const std::vector<ObsoleteStripe>& obsolete) {
  uint64_t forgotten = 0;  // obsolete versions come grouped by inode
  for (const auto& o : obsolete) {
    if (o.inode != forgotten) maps_.Forget(o.inode), forgotten = o.inode;
  }
  for (const auto& o : obsolete)
    collector_->Enqueue(o, view_->LayoutFor(o.inode, o.stripe),
                        /*dropped=*/true);
}

}  // namespace stripefs
