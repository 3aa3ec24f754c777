#include "backend/client/stripe_write.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "backend/client/write_wave.h"

namespace stripefs {

namespace {

std::string StripeName(uint64_t ino, uint64_t stripe) {
  return "stripe " + std::to_string(stripe) + " of inode " +
         std::to_string(ino);
}

int Popcount(uint32_t v) { return __builtin_popcount(v); }

}  // namespace

Result<uint64_t> StripeWriteExecutor::NextVersion() {
  MutexLock lock(&version_mu_);
  if (next_version_ == version_limit_) {
    auto first = p_.meta->AllocateVersions(options_.version_batch);
    if (!first.ok()) return first.status().Annotate("allocating versions");
    next_version_ = *first;
    version_limit_ = *first + options_.version_batch;
  }
  return next_version_++;
}

bool StripeWriteExecutor::MovedOn(uint64_t ino, const StripeVersion& base) {
  auto now = p_.meta->GetStripes(ino, base.stripe, 1);
  if (!now.ok()) return false;
  // Replaced, or dropped (a truncate): a base from the map cache can be
  // either, until a commit says so.
  if (!now->empty() && now->front().stripe == base.stripe &&
      now->front().version == base.version)
    return false;
  ClientCounters::Add(p_.counters->commit_conflicts);
  Stale(ino);
  return true;
}

void StripeWriteExecutor::Stale(uint64_t ino) { p_.maps->Forget(ino); }

Result<std::optional<StripeVersion>> StripeWriteExecutor::CommittedBase(
    const StripeWriteRequest& req) {
  auto read = [&](uint64_t first, uint64_t count) {
    return p_.meta->GetStripes(req.ino, first, count);
  };
  std::vector<StripeVersion> found;
  if (req.zero_from != kNoTruncate) {
    // Leaving a hole as it is must not rest on a cache: ask metadata.
    STRIPEFS_ASSIGN_OR_RETURN(found, read(req.stripe, 1));
  } else {
    STRIPEFS_ASSIGN_OR_RETURN(
        found, p_.maps->ReadThrough(req.ino, req.stripe, 1, kStripeMapWindow,
                                    StripeMapCache::Use::kWriteBase, read));
  }
  if (found.empty() || found.front().stripe != req.stripe)
    return std::optional<StripeVersion>();
  return std::optional<StripeVersion>(found.front());
}

void StripeWriteExecutor::WarmMap(uint64_t ino, uint64_t first, uint64_t last) {
  const uint64_t count = last - first + 1;
  if (count > kStripeMapWindow) return;
  // Best effort: a failed read leaves each stripe to its CommittedBase.
  (void)p_.maps->ReadThrough(ino, first, count, count,
                             StripeMapCache::Use::kWriteBase,
                             [&](uint64_t from, uint64_t n) {
                               return p_.meta->GetStripes(ino, from, n);
                             });
}

Status StripeWriteExecutor::Prepare(const StripeWriteRequest& req,
                                    bool last_attempt, Prepared* out,
                                    bool* retry, Wave* wave, size_t member) {
  *retry = false;
  *out = Prepared{};
  out->req = &req;
  out->wave = wave;
  out->member = member;
  auto cur = CommittedBase(req);
  if (!cur.ok()) return cur.status();
  out->exists = cur->has_value();
  if (out->exists) out->base = **cur;
  if (req.zero_from != kNoTruncate && !out->exists) {
    out->skip = true;  // a hole stays a hole
    return Status::Ok();
  }
  out->plan = PlanStripeWrite(geo_, options_.parity_delta,
                              out->exists ? &out->base : nullptr, req);
  out->layout = p_.view->LayoutFor(req.ino, req.stripe);
  STRIPEFS_ASSIGN_OR_RETURN(out->version, NextVersion());

  Status write_error;
  Status made = out->plan.kind == WriteKind::kDelta
                    ? MakeDelta(out, &write_error)
                    : MakeEncoded(out, &write_error);
  if (!made.ok()) {
    // Reading the base failed: another client may have committed (and
    // collected our base) meanwhile.
    if (!last_attempt && out->exists && MovedOn(req.ino, out->base)) {
      *retry = true;
      return Status::Ok();
    }
    return made.Annotate(out->plan.kind == WriteKind::kDelta
                             ? "parity-delta read"
                             : "read-modify-write");
  }
  // KeepWorseError ranks ENOSPC first: set when any chunk was refused so.
  out->nospace = out->failed != 0 && write_error.code() == ENOSPC;
  const bool refuse = out->nospace && options_.refuse_degraded_enospc;
  if (!refuse && static_cast<uint32_t>(Popcount(out->failed)) <= geo_.m())
    return Status::Ok();
  if (refuse && static_cast<uint32_t>(Popcount(out->failed)) <= geo_.m()) {
    // Would commit degraded for lack of space, and the user said no.
    Abandon(*out);
    ClientCounters::Add(p_.counters->degraded_refused);
    return Status(ENOSPC, StripeName(req.ino, req.stripe) + ": " +
                              std::to_string(Popcount(out->failed)) +
                              " chunk writes refused for space; not committed "
                              "degraded (degraded_writes=refuse), previous "
                              "data kept (" +
                              write_error.ToString() + ")");
  }
  // Remove what did land of the new version; the old one stays.
  Abandon(*out);
  if (!last_attempt) {
    // Servers may have come back since our map was read; patches and
    // clones start from the old version, which another client may have
    // replaced and collected meanwhile.
    auto map_changed = p_.view->RefreshIfChanged();
    if ((map_changed.ok() && *map_changed) ||
        (out->exists && MovedOn(req.ino, out->base))) {
      *retry = true;
      return Status::Ok();
    }
  }
  ClientCounters::Add(p_.counters->failed_writes);
  return Status(
      write_error.code() == ENOSPC ? ENOSPC : EIO,
      StripeName(req.ino, req.stripe) + ": " +
          std::to_string(Popcount(out->failed)) +
          " chunk writes failed, at most " + std::to_string(geo_.m()) +
          " tolerated; previous data kept (" + write_error.ToString() + ")");
}

void StripeWriteExecutor::Abandon(const Prepared& p) {
  p_.fanout->DeleteVersion(p.req->ino, p.req->stripe, p.version, p.layout,
                           ~p.failed);
}

void StripeWriteExecutor::Committed(const Prepared& p) {
  p_.maps->Committed(p.req->ino,
                     {p.req->stripe, p.version, p.failed, p.plan.chunk_len});
  switch (p.plan.kind) {
    case WriteKind::kFull:
      ClientCounters::Add(p_.counters->full_stripe_writes);
      break;
    case WriteKind::kNewPartial:
      ClientCounters::Add(p_.counters->new_partial_stripes);
      break;
    case WriteKind::kRmw:
      ClientCounters::Add(p_.counters->rmw_stripes);
      break;
    case WriteKind::kDelta:
      ClientCounters::Add(p_.counters->parity_delta_updates);
      break;
  }
  if (p.failed != 0) {
    ClientCounters::Add(p_.counters->degraded_writes);
    // Space refusals heal once space returns; a server that was down is
    // for `stripefs repair` once it is back or marked out (docs/backend.md).
    if (p_.degraded && p.nospace)
      p_.degraded->Note(p.req->ino,
                        {p.req->stripe, p.version, p.failed, p.plan.chunk_len});
  }
}

Status StripeWriteExecutor::Commit(uint64_t ino,
                                   const std::vector<StripeCommit>& commits,
                                   uint64_t min_file_size,
                                   std::vector<ObsoleteStripe>* obsolete) {
  if (KeepTimes()) {
    Status st =
        p_.meta->CommitStripesKeepTimes(ino, commits, min_file_size, obsolete);
    if (st.code() != EOPNOTSUPP) return st;
  }
  return p_.meta->CommitStripes(ino, commits, min_file_size, obsolete);
}

Status StripeWriteExecutor::Write(const StripeWriteRequest& req) {
  STRIPEFS_RETURN_IF_ERROR(ValidateWriteRequest(geo_, req));
  ObsoleteStripe obsolete;
  ChunkLayout layout;
  {
    std::lock_guard<std::mutex> lock(p_.locks->For(req.ino, req.stripe));
    bool done = false;
    for (int attempt = 0; attempt <= options_.commit_retries && !done;
         ++attempt) {
      Prepared p;
      bool retry = false;
      STRIPEFS_RETURN_IF_ERROR(
          Prepare(req, attempt == options_.commit_retries, &p, &retry));
      if (retry) continue;
      if (p.skip) return Status::Ok();
      const StripeVersion sv{req.stripe, p.version, p.failed, p.plan.chunk_len};
      const uint64_t expected = p.exists ? p.base.version : 0;
      const bool keep = KeepTimes();
      Status st;
      if (keep) {
        std::vector<ObsoleteStripe> replaced;
        st = Commit(req.ino, {StripeCommit{sv, expected}}, req.min_file_size,
                    &replaced);
        if (st.ok() && !replaced.empty()) obsolete = replaced.front();
      }
      if (!keep || st.code() == EOPNOTSUPP) {
        st = p_.meta->CommitStripe(req.ino, sv, expected, req.min_file_size,
                                   &obsolete);
      }
      if (st.code() == ESTALE) {
        ClientCounters::Add(p_.counters->commit_conflicts);
        Abandon(p);
        Stale(req.ino);
        continue;
      }
      if (!st.ok()) return st.Annotate("committing stripe");
      Committed(p);
      layout = std::move(p.layout);
      done = true;
    }
    if (!done) {
      return Status(EAGAIN, StripeName(req.ino, req.stripe) +
                                ": too many concurrent writers, gave up");
    }
  }
  // Outside the stripe lock: the collector may need it.
  p_.collector->Enqueue(obsolete, layout, /*dropped=*/false);
  return Status::Ok();
}

uint32_t StripeWriteExecutor::SendOps(Prepared* p,
                                      std::vector<ChunkWriteOp> ops,
                                      Status* error) {
  std::vector<int> indices;
  for (const ChunkWriteOp& op : ops)
    indices.push_back(static_cast<int>(op.id.index));
  std::vector<Status> errs;
  std::vector<ChunkFanout::BatchOp> batch;
  for (const ChunkWriteOp& op : ops) batch.push_back({&p->layout, op});
  if (p->wave != nullptr) {
    errs = p->wave->Write(p->member, batch);
  } else {
    errs = p_.fanout->RunBatch(batch);
  }
  return p_.fanout->Reduce(indices, errs, error);
}

void StripeWriteExecutor::PrepareWave(
    const std::vector<StripeWriteRequest>& reqs, size_t begin, size_t end,
    std::vector<Prepared>* prepared, std::vector<Status>* made,
    std::vector<char>* retry) {
  // One thread per stripe of the wave, all at once (members wait for each
  // other; kept between waves by wave_threads_). Every stripe reads first
  // (the deltas' old windows together, one ReadChunkRanges request per
  // chunk server); then the last to be ready sends all their chunk writes, one
  // request per chunk server, so each server's group commit covers the whole
  // wave with one data and one index sync.
  Wave wave(p_.fanout, p_.reader, end - begin);
  std::vector<std::function<void()>> members;
  for (size_t j = begin; j < end; ++j) {
    members.emplace_back([&, j] {
      bool again = false;
      (*made)[j] = Prepare(reqs[j], /*last_attempt=*/false, &(*prepared)[j],
                           &again, &wave, j - begin);
      (*retry)[j] = again;
      wave.Leave(j - begin);  // failed, skipped or retried before sending
    });
  }
  wave_threads_.RunAll(std::move(members));
}

void StripeWriteExecutor::PrepareWaves(
    const std::vector<StripeWriteRequest>& reqs,
    std::vector<Prepared>* prepared, std::vector<Status>* made,
    std::vector<char>* retry) {
  const size_t wave = std::max<size_t>(options_.parallel_stripes, 1);
  auto new_bytes = [&](size_t j) {
    uint64_t n = 0;
    for (const StripeRange& r : reqs[j].ranges) n += r.end - r.begin;
    return n;
  };
  for (size_t first = 0; first < reqs.size();) {
    // A wave: at least one stripe, then while stripes and bytes fit.
    size_t last = first + 1;
    uint64_t bytes = new_bytes(first);
    while (last < reqs.size() && last - first < wave &&
           bytes + new_bytes(last) <= options_.wave_bytes) {
      bytes += new_bytes(last);
      ++last;
    }
    PrepareWave(reqs, first, last, prepared, made, retry);
    first = last;
  }
}

Status StripeWriteExecutor::CommitOneByOne(
    uint64_t ino, const std::vector<StripeCommit>& commits,
    const std::vector<const Prepared*>& committing, BatchLeftovers* left) {
  for (size_t n = 0; n < committing.size(); ++n) {
    const Prepared& p = *committing[n];
    ObsoleteStripe o;
    Status one =
        p_.meta->CommitStripe(ino, commits[n].sv, commits[n].expected_version,
                              p.req->min_file_size, &o);
    if (one.code() == ESTALE) {
      ClientCounters::Add(p_.counters->commit_conflicts);
      Abandon(p);
      Stale(ino);
      left->redo.push_back(p.req);
      continue;
    }
    if (!one.ok()) return one.Annotate("committing stripe");
    Committed(p);
    left->collect.emplace_back(o, p.layout);
  }
  return Status::Ok();
}

Status StripeWriteExecutor::CommitPrepared(
    const std::vector<StripeWriteRequest>& reqs,
    const std::vector<Status>& made, const std::vector<char>& retry,
    const std::vector<Prepared>& prepared, BatchLeftovers* left) {
  Status failed;
  for (const Status& st : made)
    if (!st.ok() && failed.ok()) failed = st;
  std::vector<StripeCommit> commits;
  std::vector<const Prepared*> committing;
  uint64_t min_size = 0;
  for (size_t j = 0; j < reqs.size(); ++j) {
    if (!made[j].ok()) continue;
    if (retry[j]) {
      left->redo.push_back(&reqs[j]);
      continue;
    }
    const Prepared& p = prepared[j];
    if (p.skip) continue;
    StripeCommit commit;
    commit.sv = {reqs[j].stripe, p.version, p.failed, p.plan.chunk_len};
    commit.expected_version = p.exists ? p.base.version : 0;
    commits.push_back(commit);
    committing.push_back(&p);
    min_size = std::max(min_size, reqs[j].min_file_size);
  }
  if (!failed.ok()) {
    // All or nothing: none of the batch commits.
    for (const Prepared* p : committing) Abandon(*p);
    return failed;
  }
  const uint64_t ino = reqs[0].ino;
  std::vector<ObsoleteStripe> obsolete;
  Status st = commits.empty() ? Status::Ok()
                              : Commit(ino, commits, min_size, &obsolete);
  if (st.code() == ESTALE) {
    // All or nothing: another client committed one of them; redo each.
    ClientCounters::Add(p_.counters->commit_conflicts);
    Stale(ino);
    for (const Prepared* p : committing) {
      Abandon(*p);
      left->redo.push_back(p->req);
    }
    return Status::Ok();
  }
  // A metadata service without batch commits: commit one by one.
  if (st.code() == EOPNOTSUPP)
    return CommitOneByOne(ino, commits, committing, left);
  if (!st.ok()) return st.Annotate("committing stripes");
  for (size_t n = 0; n < committing.size(); ++n) {
    Committed(*committing[n]);
    left->collect.emplace_back(obsolete[n], committing[n]->layout);
  }
  return Status::Ok();
}

Status StripeWriteExecutor::WriteMany(
    const std::vector<StripeWriteRequest>& reqs) {
  if (reqs.size() == 1) return Write(reqs[0]);
  if (reqs.empty()) return Status::Ok();
  const uint64_t ino = reqs[0].ino;
  std::vector<uint64_t> stripes;
  for (const auto& r : reqs) {
    if (r.ino != ino) return Status::InvalidArgument("WriteMany of two files");
    STRIPEFS_RETURN_IF_ERROR(ValidateWriteRequest(geo_, r));
    stripes.push_back(r.stripe);
  }
  WarmMap(ino, *std::min_element(stripes.begin(), stripes.end()),
          *std::max_element(stripes.begin(), stripes.end()));
  std::vector<Prepared> prepared(reqs.size());
  BatchLeftovers left;
  {
    StripeLocks::Group locks(p_.locks, ino, stripes);
    std::vector<Status> made(reqs.size());
    std::vector<char> retry(reqs.size(), 0);
    PrepareWaves(reqs, &prepared, &made, &retry);
    STRIPEFS_RETURN_IF_ERROR(
        CommitPrepared(reqs, made, retry, prepared, &left));
  }
  for (const auto& [o, layout] : left.collect)
    p_.collector->Enqueue(o, layout, /*dropped=*/false);
  for (const StripeWriteRequest* r : left.redo)
    STRIPEFS_RETURN_IF_ERROR(Write(*r));
  return Status::Ok();
}

}  // namespace stripefs
