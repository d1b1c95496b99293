#include "io/backend.hpp"

#include "io/socket_io.hpp"
#include "io/xdp_io.hpp"

namespace xlatperf::io {

// The one place that chooses a backend by the plan's --io.
std::unique_ptr<Backend> open_backend(const Plan& plan, const QueryTemplate& query) {
    if (plan.xdp) return std::make_unique<XdpLink>(plan, query);
    return open_socket_backend(plan, query);
}

}  // namespace xlatperf::io
