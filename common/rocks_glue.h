// RocksGlue: how stripefs opens RocksDB, shared by the chunk store's index and
// the metadata store.
//
// ApplyRocksGlue() sets, on options the caller then completes:
//  - an info log to stderr (warnings and worse), never a LOG file in the
//    store: a LOG file on a full disk fails, and RocksDB 7.8 (built with
//    assertions in Debian) aborts when it later logs through the failed
//    writer;
//  - no automatic recovery from background errors: for a full disk RocksDB
//    would wait for write_buffer_size of free space and meanwhile make manual
//    Resume() fail with Busy. Callers resume themselves (RocksWriteSynced)
//    right after they freed space or when the next write comes;
//  - no large preallocations (small stores live on small file systems).
// RocksWriteSynced() is the full-disk-safe synced write: on failure it
// resumes the DB once and retries, and maps "no space" to ENOSPC.
//
// Thread-safety: the functions are pure or forward to thread-safe RocksDB
// calls.
#pragma once

#include <string>

#include "common/status.h"

namespace rocksdb {
class DB;
class WriteBatch;
struct Options;
class Status;
}  // namespace rocksdb

namespace stripefs {

// `owner` names the store in log lines ("chunk store /srv/c1").
void ApplyRocksGlue(rocksdb::Options* options, const std::string& owner);

// True when `s` reports a full disk or an exceeded quota.
bool IsRocksNoSpace(const rocksdb::Status& s);

// Writes `batch` with a synced WAL. ENOSPC when the disk is full, EIO for any
// other failure; `what` names the DB in the message.
Status RocksWriteSynced(rocksdb::DB* db, rocksdb::WriteBatch* batch,
                        const std::string& what);

}  // namespace stripefs
