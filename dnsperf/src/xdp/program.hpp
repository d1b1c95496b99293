#pragma once
// The kernel program's loader: opens the BPF object built with the tester
// (bpf/reply_filter.bpf.c, embedded in the binary), fills its maps with the
// server's address and port and the tester's (address, port range) pairs (as
// keys of a prefix trie: filter_keys.hpp), attaches it to one interface (native XDP, else generic) and detaches it when
// the owner goes. A program of ours that a killed run left on the interface
// (found by its name, its owner process gone) is removed first; anyone else's
// program is never touched.

#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "address.hpp"

struct bpf_object;

namespace xlatperf::xdp {

// Loading or attaching failed; the message says why and what to do.
struct XdpError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

enum class AttachMode { automatic, native, generic };

// What the program lets through to the AF_XDP socket.
struct FilterSpec {
    SockAddr server;                 // address and port the replies come from
    std::vector<Source> sources;     // the tester's addresses with their port ranges
    std::uint16_t vlan = 0;          // the 802.1Q VLAN ID the replies carry; 0: untagged
    // --encap: replies are IPv4 in IPv6 from `outer_server`, to the CEs' IPv4 addresses first_ipv4 ..
    // last_ipv4 (host order; any port: user space checks the port sets), instead of `sources`.
    bool encap = false;
    std::array<std::uint8_t, 16> outer_server{};
    std::uint32_t first_ipv4 = 0, last_ipv4 = 0;
};

// Counters of the kernel program, summed over CPUs.
struct FilterStats {
    std::uint64_t redirected = 0;    // frames handed to the AF_XDP sockets
    std::uint64_t passed = 0;        // frames passed to the kernel
    std::uint64_t unbound = 0;       // of them, replies to the tester's flows on a queue without a socket
};

// Removes a stale program of ours from `ifname`; returns true when one was removed.
// Throws XdpError when ours is held by a live process or the interface is unknown.
bool remove_stale(const std::string& ifname);

class XdpProgram {
public:
    // Throws XdpError.
    XdpProgram(const std::string& ifname, const FilterSpec& spec, AttachMode mode);
    ~XdpProgram();
    XdpProgram(const XdpProgram&) = delete;
    XdpProgram& operator=(const XdpProgram&) = delete;

    // Puts the AF_XDP socket `xsk_fd` behind receive queue `queue`.
    void bind_queue(std::uint32_t queue, int xsk_fd);

    bool native() const { return native_; }
    const char* mode_name() const { return native_ ? "native" : "generic"; }
    std::uint32_t prog_id() const { return prog_id_; }
    int ifindex() const { return ifindex_; }
    bool stale_removed() const { return stale_removed_; }
    // Keys of the reply filter's prefix trie: the (address, port range) pairs as (address, port prefix) keys.
    std::size_t filter_keys() const { return filter_keys_; }
    FilterStats stats() const;

private:
    struct ObjectDeleter {
        void operator()(bpf_object* o) const;
    };
    std::unique_ptr<bpf_object, ObjectDeleter> object_;
    int ifindex_ = 0;
    int prog_fd_ = -1;
    std::uint32_t prog_id_ = 0;
    bool native_ = false;
    bool stale_removed_ = false;
    std::size_t filter_keys_ = 0;
    int xsks_fd_ = -1;
    int stats_fd_ = -1;
};

}  // namespace xlatperf::xdp
