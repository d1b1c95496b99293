#include "net.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>
#include <linux/sock_diag.h>
#include <sys/socket.h>

namespace xlatperf {
namespace {

int get_int_option(int fd, int name) {
    int value = 0;
    socklen_t length = sizeof value;
    return getsockopt(fd, SOL_SOCKET, name, &value, &length) == 0 ? value : -1;
}

// Asks for `bytes` with the FORCE variant (root: ignores net.core.*mem_max), else
// the plain one (capped by the sysctl). Returns false when only the plain one worked.
bool set_buffer(int fd, int force_name, int name, std::uint64_t bytes, const char* what) {
    if (bytes == 0) return true;
    const int value = static_cast<int>(std::min<std::uint64_t>(bytes, INT32_MAX / 2));
    if (setsockopt(fd, SOL_SOCKET, force_name, &value, sizeof value) == 0) return true;
    if (setsockopt(fd, SOL_SOCKET, name, &value, sizeof value) != 0) {
        throw StartError(std::string("cannot set ") + what + ": " + std::strerror(errno));
    }
    return false;
}

// Value of `name` in /proc/net/snmp's "Udp:" header/value line pair.
bool read_snmp_udp(const char* name, std::uint64_t& out) {
    std::ifstream file("/proc/net/snmp");
    std::string header, values;
    while (std::getline(file, header)) {
        if (header.rfind("Udp: ", 0) != 0 || !std::getline(file, values)) continue;
        std::istringstream names(header), numbers(values);
        std::string key, number;
        while (names >> key && numbers >> number) {
            if (key == name) {
                out = std::stoull(number);
                return true;
            }
        }
    }
    return false;
}

// Value of `name` in /proc/net/snmp6 (one "Name value" pair a line); 0 when absent.
std::uint64_t read_snmp6(const char* name) {
    std::ifstream file("/proc/net/snmp6");
    std::string key;
    std::uint64_t value = 0;
    while (file >> key >> value) {
        if (key == name) return value;
    }
    return 0;
}

}  // namespace

UdpErrorCounters read_udp_error_counters() {
    UdpErrorCounters out;
    out.read = read_snmp_udp("InCsumErrors", out.checksum_errors) &&
               read_snmp_udp("RcvbufErrors", out.rcvbuf_errors) &&
               read_snmp_udp("SndbufErrors", out.sndbuf_errors);
    out.sndbuf_errors += read_snmp6("Udp6SndbufErrors");
    out.checksum_errors += read_snmp6("Udp6InCsumErrors");
    out.rcvbuf_errors += read_snmp6("Udp6RcvbufErrors");
    return out;
}

SockAddr to_sockaddr(const boost::asio::ip::udp::endpoint& endpoint) {
    SockAddr out;
    std::memcpy(&out.storage, endpoint.data(), endpoint.size());
    out.length = static_cast<socklen_t>(endpoint.size());
    return out;
}

boost::asio::ip::udp::endpoint to_endpoint(const SockAddr& address) {
    boost::asio::ip::udp::endpoint endpoint;
    std::memcpy(endpoint.data(), &address.storage, address.length);
    endpoint.resize(address.length);
    return endpoint;
}

std::string to_string(const SockAddr& address) {
    const auto endpoint = to_endpoint(address);
    const std::string host = endpoint.address().to_string();
    const std::string port = std::to_string(endpoint.port());
    return endpoint.address().is_v6() ? "[" + host + "]:" + port : host + ":" + port;
}

bool make_room_for_sockets(std::uint64_t sockets) {
    constexpr std::uint64_t kSpare = 16;  // stdio, the JSON file, netlink and probe sockets, libraries
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return true;
    const std::uint64_t needed = sockets + kSpare;
    if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= needed) return true;
    if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < needed) {
        limit.rlim_cur = limit.rlim_max;
        setrlimit(RLIMIT_NOFILE, &limit);
        return false;
    }
    limit.rlim_cur = needed;
    return setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

UdpSocket::UdpSocket(boost::asio::io_context& io, const SockAddr& local, std::uint16_t port,
                     std::uint64_t rcvbuf, std::uint64_t sndbuf)
    : socket_(io) {
    auto endpoint = to_endpoint(local);
    endpoint.port(port);
    boost::system::error_code error;
    socket_.open(endpoint.protocol(), error);
    if (error) {
        const bool fds = error.value() == EMFILE || error.value() == ENFILE;
        throw StartError("cannot open a UDP socket: " + error.message() +
                         (fds ? " (too many open files: the tester needs one socket per port, --threads x "
                                "--ports-per-thread; raise the limit, ulimit -n, or use fewer)"
                              : ""));
    }
    socket_.bind(endpoint, error);
    if (!error) socket_.non_blocking(true, error);
    if (error) {
        throw StartError("cannot bind a UDP socket to " + to_string(to_sockaddr(endpoint)) + ": " +
                         error.message() +
                         (port != 0 && error.value() != EADDRNOTAVAIL
                              ? " (choose other source ports with --first-port or --source, or ephemeral ones)"
                              : " (--bind or --source must be an address of this host)"));
    }
    const int fd = socket_.native_handle();
    // Both sizes are always asked for (no short-circuit: a refused SO_RCVBUFFORCE
    // must not leave --sndbuf unapplied).
    const bool rcv_forced = set_buffer(fd, SO_RCVBUFFORCE, SO_RCVBUF, rcvbuf, "SO_RCVBUF");
    const bool snd_forced = set_buffer(fd, SO_SNDBUFFORCE, SO_SNDBUF, sndbuf, "SO_SNDBUF");
    forced_ = rcv_forced && snd_forced;
    const int on = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on) != 0) {
        throw StartError(std::string("cannot enable SO_TIMESTAMPNS: ") + std::strerror(errno));
    }
    rcvbuf_granted_ = get_int_option(fd, SO_RCVBUF);
    sndbuf_granted_ = get_int_option(fd, SO_SNDBUF);
    local_port_ = socket_.local_endpoint(error).port();
}

std::uint64_t UdpSocket::drops() {
    std::uint32_t info[SK_MEMINFO_VARS] = {};
    socklen_t length = sizeof info;
    if (getsockopt(socket_.native_handle(), SOL_SOCKET, SO_MEMINFO, info, &length) != 0 ||
        length < static_cast<socklen_t>(sizeof(std::uint32_t) * (SK_MEMINFO_DROPS + 1))) {
        return 0;
    }
    return info[SK_MEMINFO_DROPS];
}

}  // namespace xlatperf
