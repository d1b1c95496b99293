#pragma once
// The socket backend of the I/O seam (io.hpp): one pair's K UDP sockets, each
// with its ring of outstanding queries (IDs count per socket). A round of queries
// is spread over the sockets in equal shares (one sendmmsg, or UDP_SEGMENT
// sendmsg, each); replies are read with recvmmsg and stamped by the kernel.

#include <cstdint>
#include <memory>
#include <vector>

#include "config.hpp"
#include "io/io.hpp"
#include "net.hpp"
#include "query.hpp"
#include "ring.hpp"

namespace xlatperf::io {

// The sockets of one sender/receiver pair and their rings.
struct SocketSet {
    std::vector<UdpSocket> sockets;
    std::vector<OutstandingRing> rings;
};

// `gso`: start with UDP_SEGMENT sends. Sizes stats.sent_per_socket.
std::unique_ptr<SendIo> socket_sender(const Plan& plan, const QueryTemplate& query, SocketSet& set, bool gso,
                                      SenderStats& stats);
std::unique_ptr<ReceiveIo> socket_receiver(const Plan& plan, const QueryTemplate& query, SocketSet& set,
                                           ReceiverStats& stats);

}  // namespace xlatperf::io
