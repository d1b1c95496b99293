#include <cstdio>
int main() { std::fputs("xlatperf: not built yet\n", stderr); return 1; }
