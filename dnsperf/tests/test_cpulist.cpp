#include <catch2/catch.hpp>
#include <stdexcept>

#include "cpulist.hpp"

using xlatperf::format_cpu_list;
using xlatperf::parse_cpu_list;

TEST_CASE("CPU lists parse like taskset writes them") {
    CHECK(parse_cpu_list("0") == std::vector<int>{0});
    CHECK(parse_cpu_list("1,0") == std::vector<int>{1, 0});
    CHECK(parse_cpu_list("0,2-4") == std::vector<int>{0, 2, 3, 4});
    CHECK(parse_cpu_list("5-5") == std::vector<int>{5});
}

TEST_CASE("bad CPU lists are refused with the reason") {
    for (const char* bad : {"", "a", "1,", ",1", "3-1", "0,0", "1-2,2", "-1", "1-", "99999", "0x1"}) {
        INFO("list '" << bad << "'");
        CHECK_THROWS_AS(parse_cpu_list(bad), std::invalid_argument);
    }
    CHECK_THROWS_WITH(parse_cpu_list("3-1"), Catch::Contains("backwards"));
    CHECK_THROWS_WITH(parse_cpu_list("0,0"), Catch::Contains("twice"));
}

TEST_CASE("CPU lists format with ranges") {
    CHECK(format_cpu_list({}) == "");
    CHECK(format_cpu_list({3, 0, 1, 2, 6}) == "0-3,6");
    CHECK(format_cpu_list({1}) == "1");
    CHECK(format_cpu_list({0, 2, 4}) == "0,2,4");
}
