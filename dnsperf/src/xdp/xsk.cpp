#include "xdp/xsk.hpp"

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <linux/if_xdp.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "xdp/program.hpp"

namespace xlatperf::xdp {
namespace {

bool power_of_two(std::uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

}  // namespace

void XskSocket::AreaDeleter::operator()(std::uint8_t* p) const { munmap(p, size); }

XskSocket::XskSocket(const std::string& ifname, std::uint32_t queue, const XskSizes& sizes) : sizes_(sizes), area_(nullptr, AreaDeleter{0}) {
    if (!power_of_two(sizes.frame_size) || !power_of_two(sizes.rx_frames) || !power_of_two(sizes.tx_frames) ||
        !power_of_two(sizes.ring) || sizes.frame_size < 2048) {
        throw XdpError("AF_XDP sizes must be powers of two (frames of at least 2048 bytes)");
    }
    const std::size_t bytes = std::size_t{sizes.rx_frames + sizes.tx_frames} * sizes.frame_size;
    void* area = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED) throw XdpError(std::string("cannot map the UMEM: ") + std::strerror(errno));
    area_ = std::unique_ptr<std::uint8_t, AreaDeleter>(static_cast<std::uint8_t*>(area), AreaDeleter{bytes});

    xsk_umem_config umem_config{};
    umem_config.fill_size = sizes.rx_frames;
    umem_config.comp_size = sizes.tx_frames;
    umem_config.frame_size = sizes.frame_size;
    umem_config.frame_headroom = 0;
    umem_config.flags = 0;
    if (const int err = xsk_umem__create(&umem_, area, bytes, &fill_, &comp_, &umem_config); err != 0) {
        umem_ = nullptr;
        throw XdpError(std::string("cannot register the UMEM: ") + std::strerror(-err));
    }
    xsk_socket_config config{};
    config.rx_size = sizes.ring;
    config.tx_size = sizes.ring;
    config.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;  // our program, not libxdp's
    config.xdp_flags = 0;
    config.bind_flags = XDP_USE_NEED_WAKEUP;
    if (const int err = xsk_socket__create(&socket_, ifname.c_str(), queue, umem_, &rx_, &tx_, &config);
        err != 0) {
        socket_ = nullptr;
        xsk_umem__delete(umem_);
        umem_ = nullptr;
        throw XdpError("cannot bind an AF_XDP socket to " + ifname + " queue " + std::to_string(queue) + ": " +
                       std::strerror(-err) + " (root or CAP_NET_ADMIN needed; the queue must exist)");
    }
    xdp_options options{};
    socklen_t length = sizeof options;
    if (getsockopt(fd(), SOL_XDP, XDP_OPTIONS, &options, &length) == 0) {
        zero_copy_ = (options.flags & XDP_OPTIONS_ZEROCOPY) != 0;
    }
    free_.reserve(sizes.tx_frames);
    for (std::uint32_t i = sizes.tx_frames; i-- > 0;) free_.push_back(tx_address(i));
    reserved_.reserve(sizes.ring);
    std::uint32_t index = 0;
    const std::uint32_t got = xsk_ring_prod__reserve(&fill_, sizes.rx_frames, &index);
    for (std::uint32_t i = 0; i < got; ++i) {
        *xsk_ring_prod__fill_addr(&fill_, index + i) = std::uint64_t{i} * sizes.frame_size;
    }
    xsk_ring_prod__submit(&fill_, got);
}

XskSocket::~XskSocket() {
    if (socket_ != nullptr) xsk_socket__delete(socket_);
    if (umem_ != nullptr) xsk_umem__delete(umem_);
}

int XskSocket::fd() const { return xsk_socket__fd(socket_); }

std::uint32_t XskSocket::tx_reserve(std::uint32_t wanted) {
    reap_completions();
    if (free_.size() < wanted && tx_in_flight() > 0) {  // frames the kernel has not sent yet
        kick();
        reap_completions();
    }
    wanted = std::min<std::uint32_t>(wanted, static_cast<std::uint32_t>(free_.size()));
    if (wanted == 0) return 0;
    const std::uint32_t got = xsk_ring_prod__reserve(&tx_, wanted, &tx_index_);
    reserved_.clear();
    for (std::uint32_t i = 0; i < got; ++i) {
        reserved_.push_back(free_.back());
        free_.pop_back();
    }
    return got;
}

std::uint8_t* XskSocket::tx_slot(std::uint32_t i) { return frame_at(reserved_[i]); }

void XskSocket::tx_submit(std::uint32_t count, std::uint32_t length) {
    // The ring cannot give back part of a reservation: every reserved slot is sent.
    if (count != reserved_.size()) throw std::logic_error("AF_XDP: submit every reserved TX slot");
    for (std::uint32_t i = 0; i < count; ++i) {
        xdp_desc* desc = xsk_ring_prod__tx_desc(&tx_, tx_index_ + i);
        desc->addr = reserved_[i];
        desc->len = length;
        desc->options = 0;
    }
    xsk_ring_prod__submit(&tx_, count);
}

void XskSocket::kick() {
    // Copy mode sends in this syscall, at most a kernel batch per call (EAGAIN: more
    // left), so it repeats until the TX ring is drained; zero-copy needs a call only
    // when the kernel asks for a wakeup. An interface that went away is an error:
    // without it, frames would wait in the ring for ever.
    if (zero_copy_ && !xsk_ring_prod__needs_wakeup(&tx_)) return;
    for (std::uint32_t tries = 0; tries <= sizes_.ring; ++tries) {
        ++kicks_;
        if (sendto(fd(), nullptr, 0, MSG_DONTWAIT, nullptr, 0) >= 0) return;
        if (errno == EAGAIN || errno == EBUSY) {
            reap_completions();
            continue;
        }
        if (errno == ENOBUFS || errno == EINTR) return;  // the device queue is full: the next kick goes on
        throw XdpError(std::string("AF_XDP send failed: ") + std::strerror(errno) +
                       " (the interface went down or away)");
    }
}

void XskSocket::reap_completions() {
    std::uint32_t index = 0;
    const std::uint32_t done = xsk_ring_cons__peek(&comp_, sizes_.tx_frames, &index);
    for (std::uint32_t i = 0; i < done; ++i) free_.push_back(*xsk_ring_cons__comp_addr(&comp_, index + i));
    if (done > 0) xsk_ring_cons__release(&comp_, done);
}

std::uint32_t XskSocket::receive(RxFrame* out, std::uint32_t max) {
    const std::uint32_t got = xsk_ring_cons__peek(&rx_, max, &rx_index_);
    if (got == 0) {
        if (xsk_ring_prod__needs_wakeup(&fill_)) recvfrom(fd(), nullptr, 0, MSG_DONTWAIT, nullptr, nullptr);
        return 0;
    }
    for (std::uint32_t i = 0; i < got; ++i) {
        const xdp_desc* desc = xsk_ring_cons__rx_desc(&rx_, rx_index_ + i);
        out[i].data = frame_at(desc->addr);
        out[i].length = desc->len;
    }
    rx_pending_ = got;
    return got;
}

void XskSocket::release_rx(std::uint32_t count) {
    count = std::min(count, rx_pending_);
    std::uint32_t index = 0;
    // The fill ring holds every RX frame, so this reservation always succeeds.
    const std::uint32_t got = xsk_ring_prod__reserve(&fill_, count, &index);
    for (std::uint32_t i = 0; i < got; ++i) {
        const std::uint64_t address = xsk_ring_cons__rx_desc(&rx_, rx_index_ + i)->addr;
        *xsk_ring_prod__fill_addr(&fill_, index + i) = address - address % sizes_.frame_size;
    }
    xsk_ring_prod__submit(&fill_, got);
    xsk_ring_cons__release(&rx_, count);
    rx_pending_ = 0;
}

XskStats XskSocket::stats() const {
    xdp_statistics s{};
    socklen_t length = sizeof s;
    XskStats out;
    if (getsockopt(fd(), SOL_XDP, XDP_STATISTICS, &s, &length) != 0) return out;
    out.rx_dropped = s.rx_dropped;
    out.rx_invalid_descs = s.rx_invalid_descs;
    out.tx_invalid_descs = s.tx_invalid_descs;
    out.rx_ring_full = s.rx_ring_full;
    out.rx_fill_ring_empty = s.rx_fill_ring_empty_descs;
    out.tx_ring_empty = s.tx_ring_empty_descs;
    return out;
}

}  // namespace xlatperf::xdp
