#pragma once
// The socket backend of the I/O seam (io.hpp): one pair's K UDP sockets, each
// with its ring of outstanding queries (IDs count per socket). A round of queries
// is spread over the sockets in equal shares (one sendmmsg, or UDP_SEGMENT
// sendmsg, each); replies are read with recvmmsg and stamped by the kernel.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config.hpp"
#include "io/backend.hpp"
#include "io/io.hpp"
#include "net.hpp"
#include "query.hpp"
#include "ring.hpp"

namespace xlatperf::io {

// The sockets of one sender/receiver pair, their rings and what each is bound to.
struct SocketSet {
    std::vector<UdpSocket> sockets;
    std::vector<OutstandingRing> rings;
    std::vector<std::uint16_t> ports;        // per socket, as bound
    std::vector<std::string> addresses;      // per socket, its source address (text)
};

// Binds every pair's sockets (raising the open-file limit first) and chooses UDP_SEGMENT sends (--gso).
// Throws StartError.
std::unique_ptr<Backend> open_socket_backend(const Plan& plan, const QueryTemplate& query);

}  // namespace xlatperf::io
