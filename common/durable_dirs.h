// MakeDirsDurably: `mkdir -p` whose new directories survive a power cut.
//
// POSIX makes a directory entry durable only with an fsync of the directory
// holding it; ext4 and XFS happen to journal a mkdir with the next fsync of
// anything, other file systems (and lossyfs, tests/lossyfs) do not. So a
// store that creates its own directory and then syncs only what is inside
// can lose all of it in a cut. Every directory this call creates is
// followed by an fsync of its parent; directories that already exist are
// left as they are (their durability is whoever made them's concern).
//
// Stateless; thread-safe. Errors name the path and the step that failed.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace stripefs {

// Creates `dir` and its missing ancestors (mode 0755), each new one made
// durable in its parent. `what` names the directory in errors ("chunk
// store directory").
Status MakeDirsDurably(const std::string& dir, std::string_view what);

// fsync of a directory (its entries become durable).
Status FsyncDirectory(const std::string& path);

}  // namespace stripefs
