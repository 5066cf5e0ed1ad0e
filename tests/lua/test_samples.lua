-- samples/*.lua: each runs in a few seconds on the shared trace, reads
-- its arguments from arg[1], arg[2], ... (Lua's convention, as `eldr run`
-- fills arg), and shows a difference: the TPOT values of its policies or
-- settings are not all equal, and not every "vs" column reads +0.00.
package.path = (arg[0]:match("^(.*)/") or ".") .. "/?.lua;" .. package.path
local T = require "t"

local eldr_bin = T.root .. "/" .. (os.getenv("BIN") or "bin") .. "/eldr"

local function now()
  local p = io.popen("date +%s.%N")
  local v = tonumber(p:read("l"))
  p:close()
  return v
end

-- run a sample; returns its output, exit success and seconds
local function run(sample, args)
  local t0 = now()
  local p = io.popen(string.format("%s run %s/samples/%s.lua %s 2>&1", eldr_bin, T.root, sample,
                                   args or string.format("%q", T.data)))
  local out = p:read("a")
  local ok = p:close()
  return out, ok, now() - t0
end

-- The cells of the column titled `title` in the report.print table of
-- out (columns are separated by two or more spaces; the line after the
-- header is the rule of dashes).
local function column(out, title)
  local lines = {}
  for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
  for i, l in ipairs(lines) do
    local heads = {}
    for h in (l .. "  "):gmatch("(%S.-)%s%s+") do heads[#heads + 1] = h end
    local col
    for j, h in ipairs(heads) do if h == title then col = j end end
    if col and lines[i + 1] and lines[i + 1]:match("^%-") then
      local cells = {}
      for k = i + 2, #lines do
        local row = {}
        for c in (lines[k] .. "  "):gmatch("(%S.-)%s%s+") do row[#row + 1] = c end
        if #row < #heads then break end
        cells[#cells + 1] = row[col]
      end
      return cells
    end
  end
  return {}
end

local function distinct(cells)
  local seen, n = {}, 0
  for _, c in ipairs(cells) do
    if c ~= "-" and not seen[c] then seen[c] = true; n = n + 1 end
  end
  return n
end

-- how many rows hold the most common value
local function mode_count(cells)
  local count, best = {}, 0
  for _, c in ipairs(cells) do
    count[c] = (count[c] or 0) + 1
    if count[c] > best then best = count[c] end
  end
  return best
end

local function any_nonzero(cells)
  for _, c in ipairs(cells) do
    local v = tonumber(c)
    if v and v ~= 0 then return true end
  end
  return false
end

local MAX_S = 10

-- name, TPOT column, "vs" column (nil: a quality sample without TPOT)
local tables = {
  {"balanced_vs_unbalanced", "ELDR TPOT p50 ms", "vs JSQ %"},
  {"drift", "ELDR TPOT p50", "vs JSQ %"},
  {"k_sweep", "TPOT p50 ms", "vs best %"},
  {"tau_sweep", "TPOT p50 ms", "vs best %"},
  {"transform_comparison", "rho (all layers)", nil},
}
for _, s in ipairs(tables) do
  local name, tcol, vcol = s[1], s[2], s[3]
  local out, ok, secs = run(name)
  T.ok(ok, "sample " .. name .. " runs", out:sub(1, 400))
  T.ok(secs < MAX_S, string.format("sample %s takes under %d s", name, MAX_S), secs)
  local cells = column(out, tcol)
  T.ok(#cells >= 2 and distinct(cells) >= 2 and mode_count(cells) <= #cells / 2,
       string.format("sample %s: '%s' differs across rows (no value in more than half)", name, tcol),
       table.concat(cells, " | "))
  if vcol then
    T.ok(any_nonzero(column(out, vcol)), string.format("sample %s: '%s' not all +0.00", name, vcol),
         table.concat(column(out, vcol), " | "))
  end
end

do -- layer_curve: a text plot, not a table
  local out, ok, secs = run("layer_curve")
  local rhos = {}
  for r in out:gmatch("%+layer%s+%d+%s+(%d%.%d+)") do rhos[#rhos + 1] = r end
  T.ok(ok and secs < MAX_S and distinct(rhos) >= 2 and out:find("<- N*", 1, true) ~= nil,
       "sample layer_curve: the curve varies and marks N*", out:sub(1, 400))
end

-- arguments: arg[1] is the trace, arg[2].. the sample's own (not arg[3]..)
local q = string.format("%q", T.data)
local argcases = {
  {"tau_sweep", q .. " 2 30", "K = 2 workers, Poisson 30 req/s"},
  {"balanced_vs_unbalanced", q .. " 2 30", "K = 2, Poisson 30 req/s"},
  {"k_sweep", q .. " 30", "Poisson 30 req/s"},
  {"layer_curve", q .. " count", ", count: greedy layer selection"},
  {"drift", "x 60", "Poisson 60 req/s"},
}
for _, c in ipairs(argcases) do
  local out, ok = run(c[1], c[2])
  T.ok(ok and out:find(c[3], 1, true) ~= nil, "sample " .. c[1] .. " reads arg[2], arg[3]",
       out:sub(1, 300))
end

T.done()
