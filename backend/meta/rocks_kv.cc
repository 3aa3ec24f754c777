#include "backend/meta/rocks_kv.h"

#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/snapshot.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <filesystem>
#include <utility>
#include <vector>

#include "common/rocks_glue.h"

namespace stripefs {

namespace {

Status DbError(const rocksdb::Status& s, std::string_view what) {
  return Status::IoError(std::string(what) + ": RocksDB: " + s.ToString() +
                         " (check the disk holding the metadata store)");
}

Result<std::optional<std::string>> GetAt(rocksdb::DB* db,
                                         const rocksdb::ReadOptions& ro,
                                         const std::string& key) {
  std::string v;
  rocksdb::Status st = db->Get(ro, key, &v);
  if (st.IsNotFound()) return std::optional<std::string>();
  if (!st.ok()) return DbError(st, "reading metadata");
  return std::optional<std::string>(std::move(v));
}

Result<std::vector<KvPair>> ScanAt(rocksdb::DB* db, rocksdb::ReadOptions ro,
                                   const std::string& start,
                                   const std::string& end, size_t limit) {
  rocksdb::Slice upper(end);
  ro.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro));
  std::vector<KvPair> out;
  for (it->Seek(start); it->Valid() && (limit == 0 || out.size() < limit);
       it->Next()) {
    out.push_back({it->key().ToString(), it->value().ToString()});
  }
  if (!it->status().ok()) return DbError(it->status(), "listing metadata");
  return out;
}

}  // namespace

// Reads through one RocksDB snapshot.
class RocksKv::Reader final : public KvReader {
 public:
  explicit Reader(rocksdb::DB* db) : db_(db), snap_(db->GetSnapshot()) {
    ro_.snapshot = snap_;
  }
  ~Reader() override { db_->ReleaseSnapshot(snap_); }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  Result<std::optional<std::string>> Get(const std::string& key) override {
    return GetAt(db_, ro_, key);
  }
  Result<std::vector<KvPair>> Scan(const std::string& start,
                                   const std::string& end,
                                   size_t limit) override {
    return ScanAt(db_, ro_, start, end, limit);
  }

 private:
  rocksdb::DB* db_;
  const rocksdb::Snapshot* snap_;
  rocksdb::ReadOptions ro_;
};

class RocksKv::Txn final : public KvTxn {
 public:
  explicit Txn(RocksKv* kv)
      : kv_(kv), begin_seq_(kv->db_->GetLatestSequenceNumber()) {}

  Result<std::optional<std::string>> Get(const std::string& key) override {
    read_ = true;
    return GetAt(kv_->db_.get(), rocksdb::ReadOptions(), key);
  }
  Result<std::vector<KvPair>> Scan(const std::string& start,
                                   const std::string& end,
                                   size_t limit) override {
    read_ = true;
    return ScanAt(kv_->db_.get(), rocksdb::ReadOptions(), start, end, limit);
  }
  void Put(const std::string& key, std::string value) override {
    writes_.push_back({Op::kPut, key, std::move(value)});
  }
  void Delete(const std::string& key) override {
    writes_.push_back({Op::kDelete, key, {}});
  }
  void DeleteRange(const std::string& start, const std::string& end) override {
    writes_.push_back({Op::kDeleteRange, start, end});
  }
  size_t ops() const override { return writes_.size(); }

  Result<uint64_t> Commit() override {
    if (writes_.empty()) return kv_->last_ticket();
    std::lock_guard<std::mutex> lock(kv_->commit_mu_);
    rocksdb::DB* db = kv_->db_.get();
    if (read_ && db->GetLatestSequenceNumber() != begin_seq_) {
      return Status(kKvConflict, "metadata changed during the transaction");
    }
    rocksdb::WriteBatch batch;
    for (const Write& w : writes_) {
      if (w.op == Op::kPut) {
        batch.Put(w.key, w.value);
      } else if (w.op == Op::kDelete) {
        batch.Delete(w.key);
      } else {
        // Point deletes of what is there (no range tombstones: they would
        // slow every later scan of the range).
        STRIPEFS_ASSIGN_OR_RETURN(
            std::vector<KvPair> keys,
            ScanAt(db, rocksdb::ReadOptions(), w.key, w.value, 0));
        for (const KvPair& p : keys) batch.Delete(p.key);
      }
    }
    // Not synced here: WaitDurable syncs the WAL once for every commit made
    // so far (group commit).
    rocksdb::WriteOptions wo;
    wo.sync = false;
    rocksdb::Status st = db->Write(wo, &batch);
    if (!st.ok()) return DbError(st, "writing metadata");
    return ++kv_->written_seq_;
  }

 private:
  enum class Op { kPut, kDelete, kDeleteRange };
  struct Write {
    Op op;
    std::string key;
    std::string value;  // kDeleteRange: the end key
  };
  RocksKv* kv_;
  const rocksdb::SequenceNumber begin_seq_;
  bool read_ = false;
  std::vector<Write> writes_;
};

RocksKv::RocksKv(std::string dir, std::unique_ptr<rocksdb::DB> db)
    : dir_(std::move(dir)), db_(std::move(db)) {}

RocksKv::~RocksKv() {
  if (db_) {
    rocksdb::FlushOptions fo;
    (void)db_->Flush(fo);
    (void)db_->Close();
  }
}

bool RocksKv::Exists(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::path(dir) / "CURRENT", ec);
}

Result<std::unique_ptr<RocksKv>> RocksKv::Open(const std::string& dir,
                                               bool create) {
  rocksdb::Options opts;
  opts.create_if_missing = create;
  opts.error_if_exists = create;
  opts.keep_log_file_num = 4;
  opts.max_background_jobs = 2;
  opts.paranoid_checks = true;
  ApplyRocksGlue(&opts, "metadata store " + dir);
  rocksdb::DB* raw = nullptr;
  rocksdb::Status st = rocksdb::DB::Open(opts, dir, &raw);
  if (!st.ok()) {
    std::string msg = st.ToString();
    if (msg.find("lock") != std::string::npos ||
        msg.find("LOCK") != std::string::npos) {
      return Status(EBUSY, "metadata store " + dir +
                               " is in use by another process (a metad or "
                               "mount still running?): " +
                               msg);
    }
    if (st.IsCorruption())
      return Status::Corruption("metadata store " + dir +
                                " is corrupted: " + msg);
    return Status::IoError("cannot open metadata store " + dir + ": " + msg);
  }
  return std::unique_ptr<RocksKv>(
      new RocksKv(dir, std::unique_ptr<rocksdb::DB>(raw)));
}

Result<std::optional<std::string>> RocksKv::Get(const std::string& key) {
  return GetAt(db_.get(), rocksdb::ReadOptions(), key);
}

std::unique_ptr<KvReader> RocksKv::Snapshot() {
  return std::make_unique<Reader>(db_.get());
}

std::unique_ptr<KvTxn> RocksKv::Begin() { return std::make_unique<Txn>(this); }

bool RocksKv::WritesMayBlock() const {
  uint64_t stopped = 1, delayed = 1;
  if (!db_->GetIntProperty(rocksdb::DB::Properties::kIsWriteStopped,
                           &stopped) ||
      !db_->GetIntProperty(rocksdb::DB::Properties::kActualDelayedWriteRate,
                           &delayed))
    return true;
  return stopped != 0 || delayed != 0;
}

Status RocksKv::WaitDurable(uint64_t seq) {
  std::unique_lock<std::mutex> lock(sync_mu_);
  while (synced_seq_ < seq) {
    if (syncing_) {
      sync_cv_.wait(lock);
      continue;
    }
    // Become the leader: one fsync covers every write done so far.
    syncing_ = true;
    lock.unlock();
    if (before_wal_sync_) before_wal_sync_();
    // Read after unlocking: writes applied meanwhile join this sync too.
    const uint64_t target = written_seq_.load();
    rocksdb::Status st = db_->SyncWAL();
    wal_syncs_++;
    lock.lock();
    syncing_ = false;
    sync_cv_.notify_all();
    if (!st.ok()) {
      return Status::IoError(
          "syncing the metadata WAL failed, the last change may not be "
          "durable (check the disk holding the metadata store): " +
          st.ToString());
    }
    synced_seq_ = std::max(synced_seq_, target);
  }
  return Status::Ok();
}

}  // namespace stripefs
