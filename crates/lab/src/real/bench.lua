-- Binary trees (allocation and garbage collection) and a table-driven sieve and
-- string building: what a scripting language's interpreter spends its time on.
local function bottom_up(d)
  if d == 0 then return {} end
  d = d - 1
  return { bottom_up(d), bottom_up(d) }
end
local function check(t)
  if t[1] then return 1 + check(t[1]) + check(t[2]) end
  return 1
end
local long_lived = bottom_up(16)
local total = 0
for d = 4, 16, 2 do
  local iters = 1 << (16 - d + 4)
  for _ = 1, iters do total = total + check(bottom_up(d)) end
end
local sieve, primes = {}, {}
for i = 2, 400000 do
  if not sieve[i] then
    primes[#primes + 1] = i
    for j = i * i, 400000, i do sieve[j] = true end
  end
end
local parts = {}
for i = 1, #primes, 7 do parts[#parts + 1] = tostring(primes[i]) end
print(total, check(long_lived), #primes, #table.concat(parts, ","))
