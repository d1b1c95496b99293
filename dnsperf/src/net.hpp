#pragma once
// The tester's UDP sockets: opened, bound and sized with Boost.Asio (RAII); the
// hot path uses their native handles with sendmmsg/recvmmsg/epoll.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "address.hpp"

namespace xlatperf {

// The trial could not start (a socket would not bind, a file would not open...).
struct StartError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

SockAddr to_sockaddr(const boost::asio::ip::udp::endpoint& endpoint);
boost::asio::ip::udp::endpoint to_endpoint(const SockAddr& address);
std::string to_string(const SockAddr& address);  // "192.0.2.1:53", "[2001:db8::1]:53"

// The network namespace's UDP error counters (IPv4 + IPv6, /proc/net/snmp and
// /proc/net/snmp6); `read` is false when they cannot be read.
struct UdpErrorCounters {
    std::uint64_t checksum_errors = 0;   // InCsumErrors: datagrams with a bad UDP checksum
    std::uint64_t rcvbuf_errors = 0;     // RcvbufErrors: datagrams dropped at a full receive buffer
    std::uint64_t sndbuf_errors = 0;     // SndbufErrors: datagrams dropped on the way out (full qdisc or
                                         // device queue: ENOBUFS, which a socket without IP_RECVERR hides)
    bool read = false;
};

UdpErrorCounters read_udp_error_counters();

// Raises this process's open-file limit (RLIMIT_NOFILE soft, up to the hard
// limit) so that `sockets` more descriptors fit; false when the hard limit is too low.
bool make_room_for_sockets(std::uint64_t sockets);

class UdpSocket {
public:
    // Binds `local` with `port` (0: ephemeral), non-blocking, with kernel receive
    // timestamps; asks for the buffer sizes (0: leave the kernel default), with
    // SO_RCVBUFFORCE/SO_SNDBUFFORCE when allowed so that net.core.rmem_max does not
    // cap them. Throws StartError.
    UdpSocket(boost::asio::io_context& io, const SockAddr& local, std::uint16_t port, std::uint64_t rcvbuf,
              std::uint64_t sndbuf);

    int fd() { return socket_.native_handle(); }
    std::uint16_t local_port() const { return local_port_; }
    // Sizes the kernel granted as getsockopt reports them (it doubles the asked
    // value to cover its bookkeeping).
    int rcvbuf_granted() const { return rcvbuf_granted_; }
    int sndbuf_granted() const { return sndbuf_granted_; }
    bool buffers_forced() const { return forced_; }
    // Datagrams the kernel dropped at this socket (full receive buffer...), SO_MEMINFO.
    std::uint64_t drops();

private:
    boost::asio::ip::udp::socket socket_;
    std::uint16_t local_port_ = 0;
    int rcvbuf_granted_ = 0;
    int sndbuf_granted_ = 0;
    bool forced_ = true;
};

}  // namespace xlatperf
