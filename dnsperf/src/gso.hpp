#pragma once
// UDP generic segmentation offload (UDP_SEGMENT) for the senders: one sendmsg
// carries a batch of equal-size queries, and the kernel cuts it into datagrams
// once, after the UDP and IP layers, instead of taking each query through them.
//
// The cut must happen before anything but this kernel sees the batch: a veth
// hands an uncut batch to the next namespace (the DUT would translate, route and
// count one packet where the wire would carry 64). So "auto" uses it only where
// that holds: the loopback device (the receiving socket cuts it) or a device with
// tx-udp-segmentation off (the kernel cuts it just before the driver).

#include <cstddef>
#include <string>
#include <vector>

#include <sys/uio.h>

#include "config.hpp"

namespace xlatperf {

// The kernel takes at most this many segments in one UDP_SEGMENT send
// (UDP_MAX_SEGMENTS: 64 up to Linux 6.8, 128 since).
constexpr std::size_t kMaxGsoSegments = 64;

struct GsoChoice {
    bool use = false;
    std::string device;  // egress device towards the server ("" when it could not be found)
    std::string reason;  // "allowed: ...", "not allowed: ...", "forced (--gso on)" or "off (--gso off)"
};

// mode: "auto", "on" or "off" (--gso); sources: the local addresses the sockets bind.
GsoChoice choose_gso(const std::string& mode, const SockAddr& server, const std::vector<SockAddr>& sources);

// The device a datagram from `source` (port 0, the wildcard allowed) to `server`
// leaves by: the output interface of the kernel's route for it (netlink
// RTM_GETROUTE, as `ip route get SERVER from SOURCE`), not the device that owns
// the source address (a source on lo may be routed out through a veth); name ""
// when unknown.
struct Egress {
    std::string device;
    bool loopback = false;
};
Egress egress_of(const SockAddr& server, const SockAddr& source);

// 1 when `device` has the feature `name` (ethtool -k) active, 0 when not, -1 when unknown.
int device_feature(const std::string& device, const std::string& name);

// Sends `count` messages of `size` bytes each, from iov[0..count), to `to` in one
// UDP_SEGMENT sendmsg (MSG_DONTWAIT). Returns count, or -1 with errno set.
int send_segmented(int fd, const sockaddr* to, socklen_t to_length, iovec* iov, std::size_t count,
                   std::size_t size);

// Errors that say this socket or device cannot take a UDP_SEGMENT send at all
// (so the sender goes back to sendmmsg), rather than that this one send failed.
bool gso_refused(int error);

}  // namespace xlatperf
