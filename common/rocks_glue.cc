#include "common/rocks_glue.h"

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/listener.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <cstdarg>
#include <cstdio>
#include <memory>

namespace stripefs {
namespace {

class StderrRocksLogger : public rocksdb::Logger {
 public:
  explicit StderrRocksLogger(std::string owner)
      : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL),
        owner_(std::move(owner)) {}
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    char buf[1024];
    std::vsnprintf(buf, sizeof(buf), format, ap);
    std::fprintf(stderr, "stripefs %s: rocksdb: %s\n", owner_.c_str(), buf);
  }
  void Logv(const rocksdb::InfoLogLevel level, const char* format,
            va_list ap) override {
    if (level < GetInfoLogLevel()) return;
    Logv(format, ap);
  }

 private:
  std::string owner_;
};

class NoAutoRecovery : public rocksdb::EventListener {
 public:
  void OnErrorRecoveryBegin(rocksdb::BackgroundErrorReason /*reason*/,
                            rocksdb::Status /*bg_error*/,
                            bool* auto_recovery) override {
    *auto_recovery = false;
  }
};

}  // namespace

void ApplyRocksGlue(rocksdb::Options* o, const std::string& owner) {
  o->manifest_preallocation_size = 64 << 10;
  o->allow_fallocate = false;
  o->keep_log_file_num = 4;
  o->info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  o->info_log = std::make_shared<StderrRocksLogger>(owner);
  o->listeners.push_back(std::make_shared<NoAutoRecovery>());
}

bool IsRocksNoSpace(const rocksdb::Status& s) {
  const std::string text = s.ToString();
  return s.IsNoSpace() || text.find("No space left") != std::string::npos ||
         text.find("Disk quota exceeded") != std::string::npos;
}

Status RocksWriteSynced(rocksdb::DB* db, rocksdb::WriteBatch* batch,
                        const std::string& what) {
  rocksdb::WriteOptions wo;
  wo.sync = true;
  rocksdb::Status s = db->Write(wo, batch);
  if (!s.ok()) {
    // After a failed WAL write RocksDB stops accepting writes until resumed;
    // try once (succeeds when the cause, e.g. a full disk, is gone).
    rocksdb::Status r = db->Resume();
    if (r.ok()) {
      s = db->Write(wo, batch);
    } else {
      std::fprintf(stderr,
                   "stripefs %s: write failed (%s); resume failed: %s\n",
                   what.c_str(), s.ToString().c_str(), r.ToString().c_str());
    }
  }
  if (s.ok()) return Status::Ok();
  if (IsRocksNoSpace(s)) {
    return Status::NoSpace(what + " cannot be written: " + s.ToString());
  }
  return Status::IoError(what + " cannot be written: " + s.ToString());
}

}  // namespace stripefs
