#pragma once
// A planned --source for the unit tests: an IPv4 or IPv6 literal (port 0) with its port ranges, its
// address made by the tester's own conversion (net.hpp), so the tests build no socket address by hand.
#include <boost/asio/ip/address.hpp>
#include <utility>
#include <vector>

#include "config.hpp"
#include "net.hpp"

namespace xlatperf {

inline Source test_source(const char* text, std::vector<PortRange> ranges) {
    Source s;
    s.address = to_sockaddr(boost::asio::ip::udp::endpoint(boost::asio::ip::make_address(text), 0));
    s.text = text;
    s.ranges = std::move(ranges);
    return s;
}

}  // namespace xlatperf
