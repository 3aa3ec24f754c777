// Test-only fakes of MetaService and ChunkService for the RPC tests.
//
// ScriptedMetaService records the name and arguments of every call and
// returns a result the test set beforehand (or a forced error), so a test can
// check that each argument and result crosses the wire unchanged.
// MemoryChunkService is a small in-memory chunk store with a "stall" knob
// (ReadChunk blocks until released) for timeout tests.
// Both are thread-safe (one mutex).
#pragma once

#include <any>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "backend/chunk/chunk_service.h"
#include "backend/meta/meta_service.h"

namespace stripefs::testing {

class ScriptedMetaService final : public MetaService {
 public:
  // What the next call returns: `result` (must hold the method's value type)
  // or `error` when not OK. `out` fills the out-parameter (obsolete list,
  // replaced inode, obsolete stripe) when the method has one.
  void Script(std::any result, std::any out = {}, Status error = Status::Ok()) {
    std::lock_guard<std::mutex> l(mu_);
    result_ = std::move(result);
    out_ = std::move(out);
    error_ = std::move(error);
  }
  void Fail(Status error) { Script({}, {}, std::move(error)); }
  std::string last_call() {
    std::lock_guard<std::mutex> l(mu_);
    return last_call_;
  }
  template <typename... A>
  std::tuple<A...> last_args() {
    std::lock_guard<std::mutex> l(mu_);
    return std::any_cast<std::tuple<A...>>(last_args_);
  }

  Result<Geometry> GetGeometry() override {
    return Rec<Geometry>("GetGeometry");
  }
  Result<ClusterMap> GetClusterMap() override {
    return Rec<ClusterMap>("GetClusterMap");
  }
  Status UpsertServer(const ServerInfo& info) override {
    return RecStatus("UpsertServer", info);
  }
  Status SetServerState(uint32_t id, ServerState state) override {
    return RecStatus("SetServerState", id, state);
  }
  Result<InodeAttr> Lookup(uint64_t parent, const std::string& name) override {
    return Rec<InodeAttr>("Lookup", parent, name);
  }
  Result<InodeAttr> GetAttr(uint64_t ino) override {
    return Rec<InodeAttr>("GetAttr", ino);
  }
  Result<InodeAttr> SetAttr(uint64_t ino, const SetAttrRequest& req,
                            std::vector<ObsoleteStripe>* obsolete) override {
    auto r = Rec<InodeAttr>("SetAttr", ino, req);
    FillOut(obsolete);
    return r;
  }
  Result<InodeAttr> MkNode(uint64_t parent, const std::string& name,
                           uint32_t mode, uint32_t uid, uint32_t gid,
                           uint32_t rdev) override {
    return Rec<InodeAttr>("MkNode", parent, name, mode, uid, gid, rdev);
  }
  Result<InodeAttr> Mkdir(uint64_t parent, const std::string& name,
                          uint32_t mode, uint32_t uid, uint32_t gid) override {
    return Rec<InodeAttr>("Mkdir", parent, name, mode, uid, gid);
  }
  Result<InodeAttr> Symlink(uint64_t parent, const std::string& name,
                            const std::string& target, uint32_t uid,
                            uint32_t gid) override {
    return Rec<InodeAttr>("Symlink", parent, name, target, uid, gid);
  }
  Result<std::string> ReadLink(uint64_t ino) override {
    return Rec<std::string>("ReadLink", ino);
  }
  Result<InodeAttr> Link(uint64_t ino, uint64_t new_parent,
                         const std::string& new_name) override {
    return Rec<InodeAttr>("Link", ino, new_parent, new_name);
  }
  Result<InodeAttr> Unlink(uint64_t parent, const std::string& name) override {
    return Rec<InodeAttr>("Unlink", parent, name);
  }
  // Answer EOPNOTSUPP as MetaService's default (an older metad) does.
  std::atomic<bool> entry_calls_unsupported{false};
  Result<EntryChange> CreateEntry(const CreateEntryRequest& req) override {
    if (entry_calls_unsupported) return MetaService::CreateEntry(req);
    return Rec<EntryChange>("CreateEntry", req.parent, req.name, req.mode,
                            req.uid, req.gid, req.rdev, req.flags);
  }
  Result<EntryChange> UnlinkEntry(uint64_t parent,
                                  const std::string& name) override {
    if (entry_calls_unsupported) return MetaService::UnlinkEntry(parent, name);
    return Rec<EntryChange>("UnlinkEntry", parent, name);
  }
  Status Rmdir(uint64_t parent, const std::string& name) override {
    return RecStatus("Rmdir", parent, name);
  }
  Status Rename(uint64_t parent, const std::string& name, uint64_t new_parent,
                const std::string& new_name, uint32_t flags,
                uint64_t* replaced) override {
    Status s = RecStatus("Rename", parent, name, new_parent, new_name, flags);
    FillOut(replaced);
    return s;
  }
  Result<std::vector<DirEntry>> ReadDir(uint64_t ino, uint64_t cookie,
                                        uint32_t max_entries) override {
    return Rec<std::vector<DirEntry>>("ReadDir", ino, cookie, max_entries);
  }
  Status PurgeInode(uint64_t ino,
                    std::vector<ObsoleteStripe>* obsolete) override {
    Status s = RecStatus("PurgeInode", ino);
    FillOut(obsolete);
    return s;
  }
  // result: the codes (std::vector<int32_t>); out: the stripes.
  Status ListOrphanStripes(const std::vector<uint64_t>& inos,
                           std::vector<int32_t>* codes,
                           std::vector<ObsoleteStripe>* stripes) override {
    auto r = Rec<std::vector<int32_t>>("ListOrphanStripes", inos);
    if (!r.ok()) return r.status();
    *codes = *r;
    FillOut(stripes);
    return Status::Ok();
  }
  Result<std::vector<uint64_t>> ListOrphans() override {
    return Rec<std::vector<uint64_t>>("ListOrphans");
  }
  Result<FsStats> StatFs() override { return Rec<FsStats>("StatFs"); }
  Status SetXattr(uint64_t ino, const std::string& name,
                  const std::string& value, uint32_t flags) override {
    return RecStatus("SetXattr", ino, name, value, flags);
  }
  Result<std::string> GetXattr(uint64_t ino, const std::string& name) override {
    return Rec<std::string>("GetXattr", ino, name);
  }
  Result<std::vector<std::string>> ListXattr(uint64_t ino) override {
    return Rec<std::vector<std::string>>("ListXattr", ino);
  }
  Status RemoveXattr(uint64_t ino, const std::string& name) override {
    return RecStatus("RemoveXattr", ino, name);
  }
  Result<uint64_t> AllocateVersions(uint32_t count) override {
    return Rec<uint64_t>("AllocateVersions", count);
  }
  Result<std::vector<StripeVersion>> GetStripes(uint64_t ino, uint64_t first,
                                                uint64_t count) override {
    return Rec<std::vector<StripeVersion>>("GetStripes", ino, first, count);
  }
  Status CommitStripe(uint64_t ino, const StripeVersion& sv,
                      uint64_t expected_version, uint64_t min_file_size,
                      ObsoleteStripe* obsolete) override {
    Status s =
        RecStatus("CommitStripe", ino, sv, expected_version, min_file_size);
    FillOut(obsolete);
    return s;
  }
  Status SetStripeMissing(uint64_t ino, uint64_t stripe, uint64_t version,
                          uint32_t missing_mask) override {
    return RecStatus("SetStripeMissing", ino, stripe, version, missing_mask);
  }
  Result<std::vector<StripeRef>> ListStripes(uint64_t after_inode,
                                             uint64_t after_stripe,
                                             uint32_t limit) override {
    return Rec<std::vector<StripeRef>>("ListStripes", after_inode, after_stripe,
                                       limit);
  }

 private:
  template <typename... A>
  Status RecStatus(const char* name, const A&... a) {
    std::lock_guard<std::mutex> l(mu_);
    last_call_ = name;
    last_args_ = std::make_tuple(a...);
    return error_;
  }
  template <typename R, typename... A>
  Result<R> Rec(const char* name, const A&... a) {
    Status s = RecStatus(name, a...);
    if (!s.ok()) return s;
    std::lock_guard<std::mutex> l(mu_);
    return std::any_cast<R>(result_);
  }
  template <typename T>
  void FillOut(T* out) {
    std::lock_guard<std::mutex> l(mu_);
    if (out && error_.ok() && out_.has_value()) *out = std::any_cast<T>(out_);
  }

  std::mutex mu_;
  std::string last_call_;
  std::any last_args_;
  std::any result_;
  std::any out_;
  Status error_;
};

class MemoryChunkService final : public ChunkService {
 public:
  Status WriteChunk(const ChunkId& id, uint64_t version,
                    std::span<const uint8_t> data) override {
    std::lock_guard<std::mutex> l(mu_);
    if (!write_error_.ok()) return write_error_;
    chunks_[{id, version}] = std::vector<uint8_t>(data.begin(), data.end());
    ++writes_;
    return Status::Ok();
  }
  Result<std::vector<uint8_t>> ReadChunk(const ChunkId& id, uint64_t version,
                                         uint32_t offset,
                                         uint32_t length) override {
    std::unique_lock<std::mutex> l(mu_);
    ++reads_started_;
    cv_.notify_all();
    cv_.wait(l, [&] { return !stalled_; });
    ++reads_;
    auto it = chunks_.find({id, version});
    if (it == chunks_.end())
      return Status::NotFound("chunk " + std::to_string(id.inode) + "/" +
                              std::to_string(id.stripe) + "/" +
                              std::to_string(id.index) + " v" +
                              std::to_string(version) + " not stored");
    if (uint64_t{offset} + length > it->second.size())
      return Status::InvalidArgument("range past the end of the chunk");
    return std::vector<uint8_t>(it->second.begin() + offset,
                                it->second.begin() + offset + length);
  }
  Status DeleteChunk(const ChunkId& id, uint64_t keep_version) override {
    std::lock_guard<std::mutex> l(mu_);
    for (auto it = chunks_.begin(); it != chunks_.end();) {
      if (it->first.first == id && it->first.second != keep_version)
        it = chunks_.erase(it);
      else
        ++it;
    }
    return Status::Ok();
  }
  Status DeleteChunkVersion(const ChunkId& id, uint64_t version) override {
    std::lock_guard<std::mutex> l(mu_);
    chunks_.erase({id, version});
    return Status::Ok();
  }
  Result<std::vector<ChunkInfo>> ListChunks(const ChunkInfo& after,
                                            uint32_t limit) override {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<ChunkInfo> out;
    for (auto it = chunks_.upper_bound({after.id, after.version});
         it != chunks_.end() && out.size() < limit; ++it) {
      ChunkInfo ci;
      ci.id = it->first.first;
      ci.version = it->first.second;
      ci.length = static_cast<uint32_t>(it->second.size());
      ci.crc32c = 0x1234u + ci.length;
      out.push_back(ci);
    }
    return out;
  }
  Result<ChunkStoreStats> Stats() override {
    std::lock_guard<std::mutex> l(mu_);
    ChunkStoreStats s;
    s.chunks = chunks_.size();
    for (auto& [k, v] : chunks_) s.bytes_stored += v.size();
    s.bytes_free = 1ull << 40;
    s.crc_errors = 3;
    s.writes = writes_;
    s.reads = reads_;
    return s;
  }

  void SetWriteError(Status s) {
    std::lock_guard<std::mutex> l(mu_);
    write_error_ = std::move(s);
  }
  // While stalled, ReadChunk blocks (after counting itself as started).
  void SetStalled(bool stalled) {
    std::lock_guard<std::mutex> l(mu_);
    stalled_ = stalled;
    cv_.notify_all();
  }
  uint64_t reads_started() {
    std::lock_guard<std::mutex> l(mu_);
    return reads_started_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stalled_ = false;
  Status write_error_;
  uint64_t writes_ = 0, reads_ = 0, reads_started_ = 0;
  std::map<std::pair<ChunkId, uint64_t>, std::vector<uint8_t>> chunks_;
};

}  // namespace stripefs::testing
