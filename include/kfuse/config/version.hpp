#pragma once

#define KFUSE_VERSION_MAJOR 0
#define KFUSE_VERSION_MINOR 1
#define KFUSE_VERSION_PATCH 0

namespace kfuse {
inline constexpr int version_major = KFUSE_VERSION_MAJOR;
inline constexpr int version_minor = KFUSE_VERSION_MINOR;
inline constexpr int version_patch = KFUSE_VERSION_PATCH;
}  // namespace kfuse
