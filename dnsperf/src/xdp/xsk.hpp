#pragma once
// UMEM and the four AF_XDP rings, owned RAII (libxdp's xsk API). One UMEM per
// socket: its first half of frames receives (they live on the fill ring or in
// the RX ring), its second half transmits (a free list of frame addresses; a
// frame comes back through the completion ring). TX frames keep what was
// written into them, so a frame template is written once per slot and a query
// writes only what varies.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <xdp/xsk.h>

namespace xlatperf::xdp {

struct XskSizes {
    std::uint32_t frame_size = 2048;     // bytes per UMEM frame
    std::uint32_t rx_frames = 4096;      // frames for receiving (fill + RX rings)
    std::uint32_t tx_frames = 4096;      // frames for sending (TX + completion rings)
    std::uint32_t ring = 2048;           // entries of each ring (power of two)
};

// Kernel counters of one socket (XDP_STATISTICS).
struct XskStats {
    std::uint64_t rx_dropped = 0;         // dropped for other reasons than a full ring
    std::uint64_t rx_invalid_descs = 0;
    std::uint64_t tx_invalid_descs = 0;
    std::uint64_t rx_ring_full = 0;       // dropped: the RX ring was full
    std::uint64_t rx_fill_ring_empty = 0; // times the fill ring was empty
    std::uint64_t tx_ring_empty = 0;      // times the TX ring was empty when the kernel looked
};

// One received frame: its bytes stay valid until release_rx().
struct RxFrame {
    const std::uint8_t* data = nullptr;
    std::uint32_t length = 0;
};

class XskSocket {
public:
    // Creates the UMEM and binds a socket to `queue` of `ifname` (zero-copy if
    // the driver offers it, else copy mode). No program is loaded by libxdp:
    // XdpProgram::bind_queue() puts fd() into ours. Throws XdpError.
    XskSocket(const std::string& ifname, std::uint32_t queue, const XskSizes& sizes);
    ~XskSocket();
    XskSocket(const XskSocket&) = delete;
    XskSocket& operator=(const XskSocket&) = delete;

    int fd() const;
    bool zero_copy() const { return zero_copy_; }
    const XskSizes& sizes() const { return sizes_; }

    // Every TX frame, once (for writing the template): pointer and UMEM address.
    std::uint32_t tx_frame_count() const { return sizes_.tx_frames; }
    std::uint8_t* tx_frame(std::uint32_t i) { return frame_at(tx_address(i)); }

    // Sending: reserve up to `wanted` TX descriptors and frames; fill every
    // reserved frame through tx_slot(i), then tx_submit(reserved, length) and kick().
    std::uint32_t tx_reserve(std::uint32_t wanted);
    std::uint8_t* tx_slot(std::uint32_t i);          // i < reserved
    void tx_submit(std::uint32_t count, std::uint32_t length);
    void kick();                                      // until the kernel took the whole batch
    void reap_completions();                          // TX frames back to the free list
    std::uint32_t tx_in_flight() const { return sizes_.tx_frames - static_cast<std::uint32_t>(free_.size()); }
    std::uint64_t kicks() const { return kicks_; }      // sendto calls

    // Receiving: up to `max` frames; release them with release_rx(count).
    std::uint32_t receive(RxFrame* out, std::uint32_t max);
    void release_rx(std::uint32_t count);

    XskStats stats() const;

private:
    std::uint8_t* frame_at(std::uint64_t address) { return area_.get() + address; }
    std::uint64_t tx_address(std::uint32_t i) const {
        return std::uint64_t{sizes_.rx_frames + i} * sizes_.frame_size;
    }
    void refill(std::uint32_t count);

    struct AreaDeleter {
        std::size_t size;
        void operator()(std::uint8_t* p) const;
    };
    XskSizes sizes_;
    std::unique_ptr<std::uint8_t, AreaDeleter> area_;
    xsk_ring_prod fill_{};
    xsk_ring_cons comp_{};
    xsk_ring_cons rx_{};
    xsk_ring_prod tx_{};
    xsk_umem* umem_ = nullptr;
    xsk_socket* socket_ = nullptr;
    std::vector<std::uint64_t> free_;                 // TX frame addresses not in flight
    std::vector<std::uint64_t> reserved_;             // addresses of the reserved TX slots
    std::uint32_t tx_index_ = 0;                      // first reserved TX descriptor
    std::uint32_t rx_index_ = 0;                      // first received RX descriptor
    std::uint32_t rx_pending_ = 0;                    // received, not released
    std::uint64_t kicks_ = 0;
    bool zero_copy_ = false;
};

}  // namespace xlatperf::xdp
