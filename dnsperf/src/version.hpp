#pragma once

namespace xlatperf {
// "0.1.0+g<commit>[-dirty]": the project version and the git commit built.
const char* version();
}  // namespace xlatperf
