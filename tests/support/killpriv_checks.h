// Checks of the FUSE_HANDLE_KILLPRIV_V2 contract (fuse/
// raw_file_system.h) through a mounted directory, for any file system our
// engine serves (MemFs in tests/fuse, StripeFs in tests/fs), plus the
// helpers they are made of: run a step as an unprivileged user, and read a
// mode as the file system has it rather than from the kernel's cache.
// The caller must be root and the mount needs allow_other. The Expect*
// functions report with gtest EXPECTs. Call from the test's main thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

namespace stripefs::testing {

inline constexpr uid_t kNobodyUid = 65534;
inline constexpr gid_t kNobodyGid = 65534;

// Runs `step` in a forked child as uid/gid (all three ids, no capabilities
// left) and returns what it returned (0 = success, else an errno), or -1
// when the child could not drop privileges or died. `step` must only make
// async-signal-safe calls (the parent may have threads).
int RunAs(uid_t uid, gid_t gid, const std::function<int()>& step);

// open(O_WRONLY) + write(`bytes`) + close; 0 or errno. For RunAs steps.
int WriteFile(const std::string& path, const char* bytes, size_t n);

// st_mode & 07777 fetched with AT_STATX_FORCE_SYNC (a FUSE file system is
// asked, the cache is not trusted); -1 with the errno in *err on failure.
long ServerMode(const std::string& path, int* err = nullptr);

// Requests of one opcode the engine has served so far (per_opcode stats).
using OpcodeCount = std::function<uint64_t(uint32_t opcode)>;

struct ProbeCount {
  uint64_t getxattr = 0;      // GETXATTRs sent during the writes
  uint64_t attr_replies = 0;  // GETATTR/LOOKUP/SETATTR/CREATE meanwhile
};
// Creates `file` and writes `writes` single bytes to it as root, counting
// the capability probes the kernel sends meanwhile. Each attribute reply
// clears the kernel's S_NOSEC latch, so with killpriv v2 getxattr <= 1 +
// attr_replies; without it getxattr >= writes.
ProbeCount CapabilityProbesDuringWrites(const std::string& file, int writes,
                                        const OpcodeCount& count);

// In `dir`: a write and a truncate by nobody clear set-user-ID and (with
// group execute) set-group-ID; set-group-ID without group execute stays; a
// chown by root clears set-user-ID; a write by root keeps it (CAP_FSETID).
void ExpectKillprivV2Contract(const std::string& dir);

}  // namespace stripefs::testing
