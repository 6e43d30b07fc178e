/* Workload driver of the end-to-end bench for the Lua 5.4 interpreter (lupa's bundled
 * onelua.c, built with MAKE_LIB): runs one Lua program through the interpreter.
 *
 *     lua_driver N SEED
 *
 * The program is the same for every input; N (the problem size) and SEED (the data) make
 * the profiling and the measuring inputs differ.  It exercises what an interpreter's hot
 * path is made of: the bytecode dispatch loop, table get/set (array and hash parts),
 * string building, pattern matching and formatting, closures and upvalues, metatables,
 * method calls, coroutines, sorting with a Lua comparator, and the garbage collector.
 * It prints a few checksums, so every build's output can be compared with the baseline's.
 */
#include <stdio.h>
#include <stdlib.h>

#include "lauxlib.h"
#include "lua.h"
#include "lualib.h"

static const char *PROGRAM =
    "local N, SEED = ...\n"
    "local rnd = SEED * 7919 % 2147483647 + 1\n"
    "local function rand(m)\n"
    "  rnd = rnd * 16807 % 2147483647\n"
    "  return rnd % m\n"
    "end\n"
    /* records: tables with a hash part, sorted with a Lua comparator */
    "local people = {}\n"
    "local names = {'ada', 'bob', 'cy', 'dee', 'eve', 'fay', 'gus', 'hal', 'ivy', 'jo'}\n"
    "for i = 1, N do\n"
    "  people[i] = {name = names[rand(#names) + 1] .. rand(1000), age = rand(90),\n"
    "               score = rand(10000) / 7}\n"
    "end\n"
    "table.sort(people, function(a, b)\n"
    "  if a.age ~= b.age then return a.age < b.age end\n"
    "  return a.name < b.name\n"
    "end)\n"
    "local agesum = 0\n"
    "for i = 1, #people, 3 do agesum = agesum + people[i].age * i % 9973 end\n"
    /* classes: metatables, methods, inheritance */
    "local Vec = {}\n"
    "Vec.__index = Vec\n"
    "function Vec.new(x, y) return setmetatable({x = x, y = y}, Vec) end\n"
    "function Vec.__add(a, b) return Vec.new(a.x + b.x, a.y + b.y) end\n"
    "function Vec:dot(o) return self.x * o.x + self.y * o.y end\n"
    "function Vec:scaled(k) return Vec.new(self.x * k, self.y * k) end\n"
    "local acc, dots = Vec.new(0, 0), 0\n"
    "for i = 1, N * 4 do\n"
    "  local v = Vec.new(rand(100) - 50, rand(100) - 50)\n"
    "  acc = acc + v:scaled(i % 3)\n"
    "  dots = (dots + v:dot(acc)) % 1000003\n"
    "end\n"
    /* strings: building, formatting, patterns, gsub with a function */
    "local parts = {}\n"
    "for i = 1, N do\n"
    "  parts[#parts + 1] = string.format('%s=%d;%05.1f', names[i % #names + 1],\n"
    "                                    rand(100000), rand(1000) / 3)\n"
    "end\n"
    "local text = table.concat(parts, ' ')\n"
    "local words, digits = 0, 0\n"
    "for k, v in text:gmatch('(%a+)=(%d+)') do\n"
    "  words = words + #k\n"
    "  digits = (digits + tonumber(v)) % 1000003\n"
    "end\n"
    "local upper = text:gsub('%a+', function(w) return w:upper() end)\n"
    "local found = 0\n"
    "for i = 1, N // 4 do\n"
    "  if upper:find(names[i % #names + 1]:upper() .. '=' .. tostring(rand(10)), 1, true) then\n"
    "    found = found + 1\n"
    "  end\n"
    "end\n"
    /* closures and upvalues */
    "local function counter(step)\n"
    "  local n = 0\n"
    "  return function() n = n + step; return n end\n"
    "end\n"
    "local cs, csum = {}, 0\n"
    "for i = 1, 64 do cs[i] = counter(i) end\n"
    "for i = 1, N * 8 do csum = (csum + cs[i % 64 + 1]()) % 1000003 end\n"
    /* coroutines: a generator pipeline */
    "local function gen(n)\n"
    "  return coroutine.wrap(function()\n"
    "    for i = 1, n do coroutine.yield(rand(1000)) end\n"
    "  end)\n"
    "end\n"
    "local gsum = 0\n"
    "for x in gen(N * 2) do if x % 2 == 0 then gsum = gsum + x end end\n"
    /* a hash table workload: word counts */
    "local counts = {}\n"
    "for i = 1, N * 4 do\n"
    "  local k = names[rand(#names) + 1] .. (rand(50))\n"
    "  counts[k] = (counts[k] or 0) + 1\n"
    "end\n"
    "local keys = {}\n"
    "for k in pairs(counts) do keys[#keys + 1] = k end\n"
    "table.sort(keys)\n"
    "local hsum = 0\n"
    "for i, k in ipairs(keys) do hsum = (hsum + i * counts[k]) % 1000003 end\n"
    /* numeric loops: a sieve and a small matrix product */
    "local sieve, primes = {}, 0\n"
    "for i = 2, N * 10 do\n"
    "  if not sieve[i] then\n"
    "    primes = primes + 1\n"
    "    for j = i * i, N * 10, i do sieve[j] = true end\n"
    "  end\n"
    "end\n"
    "local m = 24 + N % 8\n"
    "local A, B = {}, {}\n"
    "for i = 1, m do\n"
    "  A[i], B[i] = {}, {}\n"
    "  for j = 1, m do A[i][j] = rand(10); B[i][j] = rand(10) end\n"
    "end\n"
    "local trace = 0\n"
    "for i = 1, m do\n"
    "  local Ai = A[i]\n"
    "  for j = 1, m do\n"
    "    local s = 0\n"
    "    for k = 1, m do s = s + Ai[k] * B[k][j] end\n"
    "    if i == j then trace = trace + s end\n"
    "  end\n"
    "end\n"
    "print(string.format('people %d agesum %d', #people, agesum))\n"
    "print(string.format('vec %d %d dots %d', acc.x, acc.y, dots))\n"
    "print(string.format('text %d words %d digits %d found %d upper %d', #text, words,\n"
    "                    digits, found, #upper))\n"
    "print(string.format('closures %d gen %d keys %d hash %d', csum, gsum, #keys, hsum))\n"
    "print(string.format('primes %d trace %d', primes, trace))\n";

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s N SEED\n", argv[0]);
        return 2;
    }
    long n = strtol(argv[1], NULL, 10), seed = strtol(argv[2], NULL, 10);
    if (n < 1 || seed < 0) {
        fprintf(stderr, "%s: N must be >= 1 and SEED >= 0\n", argv[0]);
        return 2;
    }
    lua_State *L = luaL_newstate();
    if (!L) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        return 1;
    }
    luaL_openlibs(L);
    if (luaL_loadstring(L, PROGRAM) != LUA_OK) {
        fprintf(stderr, "%s: %s\n", argv[0], lua_tostring(L, -1));
        return 1;
    }
    lua_pushinteger(L, n);
    lua_pushinteger(L, seed);
    if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
        fprintf(stderr, "%s: %s\n", argv[0], lua_tostring(L, -1));
        return 1;
    }
    lua_close(L);
    return 0;
}
