// Plain value types of the metadata service: volume geometry, inode
// attributes, directory entries, stripe versions and the cluster map.
// Copyable values, no behaviour beyond small helpers; thread-compatible.
#pragma once

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stripefs {

inline constexpr uint64_t kRootInode = 1;
// A volume's UUID (16 random bytes, M volume_uuid): servers name it in
// their handshake so a client cannot be led to another volume's servers.
using VolumeUuid = std::array<uint8_t, 16>;

// EC geometry of a volume: k data + m parity cells of cell_size bytes.
struct Geometry {
  uint32_t k = 4;
  uint32_t m = 2;
  uint32_t cell_size = 256 * 1024;
  uint64_t stripe_size() const { return uint64_t{k} * cell_size; }
  friend bool operator==(const Geometry&, const Geometry&) = default;
};

struct Timespec {
  int64_t sec = 0;
  uint32_t nsec = 0;
  friend bool operator==(const Timespec&, const Timespec&) = default;
};

struct InodeAttr {
  uint64_t ino = 0;
  uint32_t mode = 0;  // type and permission bits (S_IFREG | 0644 ...)
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint32_t nlink = 0;
  uint64_t size = 0;
  uint32_t rdev = 0;
  uint64_t generation = 0;
  Timespec atime, mtime, ctime;
  friend bool operator==(const InodeAttr&, const InodeAttr&) = default;
};

// Which fields of SetAttrRequest apply (bit mask).
enum SetAttrMask : uint32_t {
  kSetMode = 1u << 0,
  kSetUid = 1u << 1,
  kSetGid = 1u << 2,
  kSetSize = 1u << 3,
  kSetAtime = 1u << 4,
  kSetMtime = 1u << 5,
  kSetAtimeNow = 1u << 6,
  kSetMtimeNow = 1u << 7,
  kSetCtime = 1u << 8,
  // With kSetSize: only raise the size (max(size, req.size)), never shrink or
  // drop stripes. Used to move EOF up once the stripes below it committed.
  kSetSizeAtLeast = 1u << 9,
  // mtime and ctime move only where this request sets them (kSetMtime,
  // kSetCtime, kSetMtimeNow), not to now for a size change or as the
  // change's own ctime: the writeback cache's kernel owns a regular file's
  // times and sends them itself, and an atime update changes no ctime.
  // A metad that predates it ignores it (and stamps as before).
  kKeepTimes = 1u << 10,
};

struct SetAttrRequest {
  uint32_t mask = 0;
  uint32_t mode = 0;  // permission bits only; the type never changes
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t size = 0;
  Timespec atime, mtime, ctime;
};

// MetaService::CreateEntry: a file, device, fifo, socket or directory
// named `name` in `parent`, whose owner and mode the service finishes in
// the same transaction as the create (the flags below), so a caller needs
// no GetAttr/GetXattr of the parent first.
enum CreateEntryFlags : uint32_t {
  // The parent is setgid: the new inode takes the parent's gid, and a new
  // directory is setgid too (BSD group semantics).
  kCreateInheritSetgid = 1u << 0,
  // The parent has a default ACL (system.posix_acl_default): create nothing
  // and fail with kCreateNeedsAcl, so the caller decides the mode and ACLs
  // itself (fs/posix_acl.h) and creates with MkNode/Mkdir.
  kCreateUnlessDefaultAcl = 1u << 1,
};
inline constexpr uint32_t kCreateEntryFlagsAll =
    kCreateInheritSetgid | kCreateUnlessDefaultAcl;
// The errno of CreateEntry refused by kCreateUnlessDefaultAcl.
inline constexpr int kCreateNeedsAcl = EAGAIN;

struct CreateEntryRequest {
  uint64_t parent = 0;
  std::string name;   // not empty (O_TMPFILE goes through MkNode)
  uint32_t mode = 0;  // type (S_IFREG, S_IFDIR, devices ...) and permissions
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint32_t rdev = 0;   // devices only
  uint32_t flags = 0;  // CreateEntryFlags
};

// A namespace change's effect on the entry's inode and on its directory,
// both as committed by the change (CreateEntry, UnlinkEntry).
struct EntryChange {
  InodeAttr node;
  InodeAttr parent;
};

// MetaService::RenameEntry: a rename's effect as committed -- the moved
// inode, both directories (the same attributes twice when they are one),
// and the inode the new name replaced (none for RENAME_EXCHANGE).
struct RenameChange {
  InodeAttr node;
  InodeAttr parent;
  InodeAttr new_parent;
  uint64_t replaced = 0;  // 0: none
  // replaced's attributes after the rename (nlink dropped, orphan at 0);
  // absent for a replaced directory (orphaned as by Rmdir).
  std::optional<InodeAttr> replaced_attr;
};

struct DirEntry {
  std::string name;
  uint64_t ino = 0;
  uint32_t mode = 0;    // file type bits (S_IFMT part) at least
  uint64_t cookie = 0;  // pass to ReadDir to continue after this entry
};

// The committed version of one stripe. missing_mask bit i set = chunk i was
// not written (degraded) or is known lost; repair clears bits.
struct StripeVersion {
  uint64_t stripe = 0;
  uint64_t version = 0;
  uint32_t missing_mask = 0;
  // Bytes in each of the k+m chunks of this version (all equal, <= cell
  // size): short stripes at the end of small files store short chunks.
  uint32_t chunk_len = 0;
  friend bool operator==(const StripeVersion&, const StripeVersion&) = default;
};

// One stripe of a CommitStripes call: make `sv` committed if the stripe's
// current version is `expected_version` (0 = no stripe yet).
struct StripeCommit {
  StripeVersion sv;
  uint64_t expected_version = 0;
};
// Most stripes one CommitStripes call may carry (bounds a decoded message).
inline constexpr size_t kMaxStripesPerCommit = 1024;

// A stripe version that a mutation made obsolete: its chunks can be deleted.
struct ObsoleteStripe {
  uint64_t inode = 0;
  uint64_t stripe = 0;
  uint64_t version = 0;
  friend bool operator==(const ObsoleteStripe&,
                         const ObsoleteStripe&) = default;
};

enum class ServerState : uint8_t { kUp = 0, kDown = 1, kOut = 2 };

// "up", "down", "out" (logs, `stripefs cluster status`).
inline const char* ServerStateName(ServerState s) {
  switch (s) {
    case ServerState::kUp:
      return "up";
    case ServerState::kDown:
      return "down";
    case ServerState::kOut:
      return "out";
  }
  return "?";
}

// How stripes map to chunk servers (backend/client/placement.h), recorded
// in the cluster map. Maps stored before the field existed decode as
// kLegacy, so existing volumes keep their chunk locations; volumes created
// since get kBalanced.
enum class PlacementScheme : uint8_t {
  kLegacy = 0,    // 4096 hashed groups, rendezvous over all servers
  kBalanced = 1,  // `placement_groups` units, bounded-load table
};
// Relative capacity of a server: placement gives it chunks in proportion
// (kBalanced only). 0 = holds no chunks (drained).
inline constexpr uint32_t kDefaultServerWeight = 100;
inline constexpr uint32_t kMaxServerWeight = 10000;
// Placement groups of a kBalanced map: fixed when the map is created (a
// change re-places every stripe). 2^16 gives >= 100 group-chunks per server
// up to ~4,000 servers at k+m = 6; larger clusters need more (docs/scale.md).
inline constexpr uint32_t kDefaultPlacementGroups = 1u << 16;
inline constexpr uint32_t kMaxPlacementGroups = 1u << 22;

struct ServerInfo {
  uint32_t id = 0;             // stable, unique within the cluster
  std::string address;         // "127.0.0.1:7001"; empty in embedded mode
  std::string failure_domain;  // placement never puts two chunks of a stripe
                               // in one domain when enough domains exist
  ServerState state = ServerState::kUp;
  uint32_t weight = kDefaultServerWeight;  // 0..kMaxServerWeight
  friend bool operator==(const ServerInfo&, const ServerInfo&) = default;
};

struct ClusterMap {
  uint64_t epoch = 0;  // bumped on every change
  std::vector<ServerInfo> servers;
  PlacementScheme placement = PlacementScheme::kLegacy;
  uint32_t placement_groups = 0;  // kBalanced: 1..kMaxPlacementGroups
};

struct FsStats {
  uint64_t inodes = 0;
  uint64_t bytes_used = 0;  // logical file bytes
};

struct StripeRef {
  uint64_t inode = 0;
  StripeVersion sv;
};

}  // namespace stripefs
