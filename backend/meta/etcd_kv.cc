// EtcdKv: KvStore over etcd v3's KV service (gRPC, protos generated at
// build time from Debian's golang-etcd-server-dev).
#include "backend/meta/etcd_kv.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>

#include <atomic>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>

#include "backend/meta/etcd_grpc.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"

namespace stripefs {

std::shared_ptr<grpc::Channel> EtcdChannel(
    const std::string& endpoint, const std::optional<EtcdTlsPem>& pem) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  if (!pem) {
    return grpc::CreateCustomChannel(endpoint,
                                     grpc::InsecureChannelCredentials(), args);
  }
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = pem->ca;
  ssl.pem_cert_chain = pem->cert;
  ssl.pem_private_key = pem->key;
  return grpc::CreateCustomChannel(endpoint, grpc::SslCredentials(ssl), args);
}

bool EtcdRetryable(const grpc::Status& s) {
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::ABORTED:
      return true;
    case grpc::StatusCode::UNKNOWN:
      return s.error_message().find("context deadline exceeded") !=
             std::string::npos;
    default:
      return false;
  }
}

namespace {

namespace pb = etcdserverpb;
using Clock = std::chrono::system_clock;  // what gRPC deadlines take

constexpr size_t kMaxTxnOps = 128;  // etcd's --max-txn-ops default
constexpr int64_t kPageKeys = 1000;
constexpr auto kPerTry = std::chrono::milliseconds(2000);
constexpr auto kRetryPause = std::chrono::milliseconds(50);

class EtcdKv;

// Reads pinned to one revision (taken from the first answer).
// `Interface` is KvReader (a snapshot) or KvTxn (which records the reads).
template <typename Interface>
class EtcdReader : public Interface {
 public:
  explicit EtcdReader(EtcdKv* kv) : kv_(kv) {}
  Result<std::optional<std::string>> Get(const std::string& key) override;
  Result<std::vector<KvPair>> Scan(const std::string& start,
                                   const std::string& end,
                                   size_t limit) override;

 protected:
  // What a read saw, for the commit's compares.
  virtual void Observed(const std::string& /*key*/, int64_t /*mod*/) {}
  virtual void ObservedRange(const std::string& /*start*/,
                             const std::string& /*end*/) {}
  EtcdKv* kv_;
  int64_t revision_ = 0;  // 0 until the first read
};

class EtcdKv final : public KvStore {
 public:
  EtcdKv(const EtcdLocation& where, const std::optional<EtcdTlsPem>& pem)
      : where_(where) {
    for (const std::string& ep : where.endpoints) {
      stubs_.push_back(pb::KV::NewStub(EtcdChannel(ep, pem)));
    }
    std::random_device rd;
    marker_ = where.prefix + "\xff" + "txn/" + std::to_string(rd()) + "-" +
              std::to_string(rd());
  }
  ~EtcdKv() override {
    // Best effort: the marker is one small key per process otherwise.
    pb::DeleteRangeRequest req;
    req.set_key(marker_);
    grpc::ClientContext ctx;
    ctx.set_deadline(Clock::now() + std::chrono::milliseconds(500));
    pb::DeleteRangeResponse resp;
    (void)stubs_[current_.load() % stubs_.size()]->DeleteRange(&ctx, req,
                                                               &resp);
  }

  Result<std::optional<std::string>> Get(const std::string& key) override {
    EtcdReader<KvReader> r(this);
    return r.Get(key);
  }
  std::unique_ptr<KvReader> Snapshot() override;
  std::unique_ptr<KvTxn> Begin() override;
  uint64_t last_ticket() const override { return commits_.load(); }
  Status WaitDurable(uint64_t) override { return Status::Ok(); }
  KvLimits limits() const override {
    return {kMaxTxnOps - 1, 1024 * 1024};  // bytes: under etcd's 1.5 MiB
  }
  uint64_t syncs() const override { return commits_.load(); }
  std::string Describe() const override {
    std::string eps;
    for (const std::string& e : where_.endpoints) {
      eps += (eps.empty() ? "" : ",") + e;
    }
    return std::string(where_.tls ? "etcd (TLS) " : "etcd ") + eps +
           " prefix " + where_.prefix;
  }

  Clock::time_point Deadline() const { return Clock::now() + where_.timeout; }

  // Sends one request to the current endpoint; on a retryable error moves
  // to the next endpoint and pauses (false), so the caller may try again.
  template <typename Req, typename Resp>
  bool TryOnce(grpc::Status (pb::KV::Stub::*method)(grpc::ClientContext*,
                                                    const Req&, Resp*),
               const Req& req, Resp* resp, Clock::time_point deadline,
               grpc::Status* st) {
    size_t i = current_.load();
    grpc::ClientContext ctx;
    ctx.set_deadline(std::min(deadline, Clock::now() + kPerTry));
    *st = (stubs_[i % stubs_.size()].get()->*method)(&ctx, req, resp);
    if (st->ok() || !EtcdRetryable(*st)) return true;
    current_.compare_exchange_strong(i, i + 1);
    if (Clock::now() + kRetryPause < deadline) {
      std::this_thread::sleep_for(kRetryPause);
    }
    return false;
  }

  // Sends one request, moving between endpoints until `deadline`.
  template <typename Req, typename Resp>
  Status Call(grpc::Status (pb::KV::Stub::*method)(grpc::ClientContext*,
                                                   const Req&, Resp*),
              const Req& req, Resp* resp, std::string_view what,
              Clock::time_point deadline) {
    grpc::Status last;
    while (!TryOnce(method, req, resp, deadline, &last)) {
      if (Clock::now() >= deadline) return TimedOut(what, last);
    }
    return Error(what, last);
  }
  template <typename Req, typename Resp>
  Status Call(grpc::Status (pb::KV::Stub::*method)(grpc::ClientContext*,
                                                   const Req&, Resp*),
              const Req& req, Resp* resp, std::string_view what) {
    return Call(method, req, resp, what, Deadline());
  }
  Status TimedOut(std::string_view what, const grpc::Status& last) const {
    return Status(
        ETIMEDOUT,
        std::string(what) + ": " + Describe() + " gave no answer within " +
            std::to_string(where_.timeout.count()) +
            " ms (is a quorum of etcd members up?): " + last.error_message());
  }
  Status Error(std::string_view what, const grpc::Status& last) const {
    if (last.ok()) return Status::Ok();
    const std::string& m = last.error_message();
    if (last.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
        last.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      return Status::PermissionDenied(
          std::string(what) + ": " + Describe() + ": " + m +
          (where_.tls ? " (the user named by the client certificate's "
                        "Common Name needs a role with readwrite on the "
                        "prefix; docs/metadata.md, \"etcd security\")"
                      : ""));
    }
    if (m.find("too many operations") != std::string::npos ||
        m.find("too large") != std::string::npos) {
      return Status(EFBIG, std::string(what) + ": " + m);
    }
    return Status::IoError(std::string(what) + ": " + Describe() + ": " + m);
  }

  const std::string& prefix() const { return where_.prefix; }
  const std::string& marker() const { return marker_; }
  std::mutex& commit_mu() { return commit_mu_; }
  uint64_t Committed() { return ++commits_; }

 private:
  const EtcdLocation where_;
  std::vector<std::unique_ptr<pb::KV::Stub>> stubs_;
  std::atomic<size_t> current_{0};
  std::string marker_;
  std::mutex commit_mu_;  // one commit (and its marker) at a time
  std::atomic<uint64_t> commits_{0};
};

template <typename Interface>
Result<std::optional<std::string>> EtcdReader<Interface>::Get(
    const std::string& key) {
  pb::RangeRequest req;
  req.set_key(kv_->prefix() + key);
  req.set_revision(revision_);
  pb::RangeResponse resp;
  STRIPEFS_RETURN_IF_ERROR(kv_->Call(&pb::KV::Stub::Range, req, &resp,
                                     "reading metadata from etcd"));
  if (revision_ == 0) revision_ = resp.header().revision();
  if (resp.kvs_size() == 0) {
    Observed(key, 0);
    return std::optional<std::string>();
  }
  Observed(key, resp.kvs(0).mod_revision());
  return std::optional<std::string>(resp.kvs(0).value());
}

template <typename Interface>
Result<std::vector<KvPair>> EtcdReader<Interface>::Scan(
    const std::string& start, const std::string& end, size_t limit) {
  std::vector<KvPair> out;
  const std::string& p = kv_->prefix();
  std::string from = p + start;
  while (limit == 0 || out.size() < limit) {
    pb::RangeRequest req;
    req.set_key(from);
    req.set_range_end(p + end);
    req.set_revision(revision_);
    int64_t page = kPageKeys;
    if (limit != 0) page = std::min<int64_t>(page, limit - out.size());
    req.set_limit(page);
    pb::RangeResponse resp;
    STRIPEFS_RETURN_IF_ERROR(kv_->Call(&pb::KV::Stub::Range, req, &resp,
                                       "listing metadata in etcd"));
    if (revision_ == 0) revision_ = resp.header().revision();
    for (const auto& kv : resp.kvs()) {
      out.push_back({kv.key().substr(p.size()), kv.value()});
    }
    if (!resp.more() || resp.kvs_size() == 0) break;
    from = resp.kvs(resp.kvs_size() - 1).key() + std::string(1, '\0');
  }
  ObservedRange(start, end);
  return out;
}

class EtcdTxn final : public EtcdReader<KvTxn> {
 public:
  explicit EtcdTxn(EtcdKv* kv) : EtcdReader(kv) {}

  void Put(const std::string& key, std::string value) override {
    auto* put = OpFor(key)->mutable_request_put();
    put->set_key(kv_->prefix() + key);
    put->set_value(std::move(value));
  }
  void Delete(const std::string& key) override {
    OpFor(key)->mutable_request_delete_range()->set_key(kv_->prefix() + key);
  }
  void DeleteRange(const std::string& start, const std::string& end) override {
    auto* del = Op()->mutable_request_delete_range();
    del->set_key(kv_->prefix() + start);
    del->set_range_end(kv_->prefix() + end);
  }
  size_t ops() const override { return req_.success_size(); }

  Result<uint64_t> Commit() override {
    if (req_.success_size() == 0) return kv_->last_ticket();
    if (req_.success_size() > static_cast<int>(kv_->limits().max_ops) ||
        req_.compare_size() > static_cast<int>(kMaxTxnOps)) {
      return Status(
          EFBIG,
          "metadata transaction of " + std::to_string(req_.success_size()) +
              " writes and " + std::to_string(req_.compare_size()) +
              " reads is over etcd's limit of " + std::to_string(kMaxTxnOps));
    }
    std::lock_guard<std::mutex> lock(kv_->commit_mu());
    std::random_device rd;
    const std::string nonce = std::to_string(rd()) + std::to_string(rd());
    auto* put = Op()->mutable_request_put();
    put->set_key(kv_->marker());
    put->set_value(nonce);
    if (req_.ByteSizeLong() > kv_->limits().max_bytes) {
      return Status(EFBIG, "metadata transaction of " +
                               std::to_string(req_.ByteSizeLong()) +
                               " bytes is over etcd's request limit");
    }
    constexpr std::string_view kWhat = "committing metadata to etcd";
    const auto deadline = kv_->Deadline();
    pb::TxnResponse resp;
    grpc::Status last;
    while (!kv_->TryOnce(&pb::KV::Stub::Txn, req_, &resp, deadline, &last)) {
      // The answer was lost: sending again could apply it twice (and then
      // fail its compares). Did it apply? The marker says.
      pb::RangeRequest mreq;
      mreq.set_key(kv_->marker());
      pb::RangeResponse mresp;
      Status ms =
          kv_->Call(&pb::KV::Stub::Range, mreq, &mresp, kWhat, deadline);
      if (ms.code() == ETIMEDOUT) return kv_->TimedOut(kWhat, last);
      STRIPEFS_RETURN_IF_ERROR(ms);
      if (mresp.kvs_size() == 1 && mresp.kvs(0).value() == nonce) {
        return kv_->Committed();
      }
      if (Clock::now() >= deadline) return kv_->TimedOut(kWhat, last);
    }
    STRIPEFS_RETURN_IF_ERROR(kv_->Error(kWhat, last));
    if (!resp.succeeded()) {
      return Status(kKvConflict, "metadata changed during the transaction");
    }
    return kv_->Committed();
  }

 private:
  pb::RequestOp* Op() { return req_.add_success(); }
  // etcd refuses a transaction that names one key twice ("duplicate key
  // given in txn request"), e.g. a rename with RENAME_WHITEOUT deletes a
  // name and puts it again: a later write of a key replaces the earlier one
  // in place, which is what applying both in order would leave. (Writes of
  // single keys inside a DeleteRange of the same transaction stay refused;
  // MetaStore never issues them.)
  pb::RequestOp* OpFor(const std::string& key) {
    auto [it, fresh] = op_of_key_.emplace(key, req_.success_size());
    if (fresh) return Op();
    pb::RequestOp* op = req_.mutable_success(it->second);
    op->Clear();
    return op;
  }
  void Observed(const std::string& key, int64_t mod) override {
    auto* c = req_.add_compare();
    c->set_result(pb::Compare::EQUAL);
    c->set_target(pb::Compare::MOD);
    c->set_key(kv_->prefix() + key);
    c->set_mod_revision(mod);
  }
  void ObservedRange(const std::string& start,
                     const std::string& end) override {
    // Nothing in the range changed after the revision read at.
    auto* c = req_.add_compare();
    c->set_result(pb::Compare::LESS);
    c->set_target(pb::Compare::MOD);
    c->set_key(kv_->prefix() + start);
    c->set_range_end(kv_->prefix() + end);
    c->set_mod_revision(revision_ + 1);
  }

  pb::TxnRequest req_;
  std::unordered_map<std::string, int> op_of_key_;  // index in success
};

std::unique_ptr<KvReader> EtcdKv::Snapshot() {
  return std::make_unique<EtcdReader<KvReader>>(this);
}

std::unique_ptr<KvTxn> EtcdKv::Begin() {
  return std::make_unique<EtcdTxn>(this);
}

}  // namespace

Result<std::unique_ptr<KvStore>> ConnectEtcd(const EtcdLocation& where) {
  if (where.endpoints.empty()) {
    return Status::InvalidArgument("etcd location without endpoints");
  }
  STRIPEFS_RETURN_IF_ERROR(CheckEtcdSecurity(where));
  std::optional<EtcdTlsPem> pem;
  if (where.tls) {
    STRIPEFS_ASSIGN_OR_RETURN(pem, ReadEtcdTlsFiles(*where.tls));
  }
  return std::unique_ptr<KvStore>(std::make_unique<EtcdKv>(where, pem));
}

std::string_view EtcdEngineMissing() { return {}; }

}  // namespace stripefs
