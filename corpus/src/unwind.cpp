// unwind.cpp - C++ exceptions: throwing, typed and catch-all handlers, and destructor
// cleanups, so the map carries landing pads (IsEHPad blocks).  argv[1] = rounds.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace {
int live_guards = 0;
struct Guard {  // non-trivial destructor -> cleanup landing pad in every caller
  explicit Guard(int v) : value(v) { ++live_guards; }
  ~Guard() { --live_guards; }
  int value;
};
}  // namespace

struct ParseError : std::runtime_error {
  explicit ParseError(const std::string &s) : std::runtime_error(s) {}
};

__attribute__((noinline)) int parse_digit(char c) {
  if (c < '0' || c > '9')
    throw ParseError(std::string("not a digit: ") + c);
  return c - '0';
}

__attribute__((noinline)) long parse_number(const std::string &s) {
  Guard g(static_cast<int>(s.size()));
  long v = 0;
  for (char c : s) {
    if (v > 100000000L)
      throw std::overflow_error("too big");
    v = v * 10 + parse_digit(c);
  }
  return v + g.value - g.value;
}

__attribute__((noinline)) long checked_sum(const std::vector<std::string> &words) {
  long total = 0, bad = 0, huge = 0;
  for (const std::string &w : words) {
    Guard g(1);
    try {
      total += parse_number(w);
    } catch (const ParseError &) {
      ++bad;
    } catch (const std::overflow_error &) {
      ++huge;
    } catch (...) {
      std::abort();
    }
  }
  return total + bad * 1000 + huge * 1000000;
}

int main(int argc, char **argv) {
  long rounds = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 2000;
  std::vector<std::string> words = {"12", "7x", "40", "123456789012", "9", "", "31", "q"};
  long acc = 0;
  for (long r = 0; r < rounds; r++) {
    words[0] = std::to_string(r % 997);
    acc += checked_sum(words);
  }
  std::printf("unwind: %ld rounds, sum %ld, guards %d\n", rounds, acc, live_guards);
  return live_guards == 0 ? 0 : 1;
}
