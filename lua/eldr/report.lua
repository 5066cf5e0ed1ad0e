-- eldr.report - aligned text tables and CSV from lists of rows.
--
-- A row is a Lua table; columns name the keys to show, either as strings
-- or as {key = ..., title = ..., fmt = ...} (fmt: a string.format pattern
-- or a function(value) -> string). Without columns, the table has every
-- key that any row has (sorted), so a key missing from the first row (the
-- tau of a sweep whose first row is a baseline) still gets its column.
-- Numbers are right-aligned, text left; floats print readably unless fmt
-- says otherwise (M.number: 4 significant digits, no exponent between
-- 1e-4 and 1e15, no trailing zeros, so 0.1 + 0.2 prints as 0.3 and
-- 11430.4 as 11430); a missing value prints as "-" (text) or an empty
-- field (CSV, where floats keep every digit that matters).
local M = {}

local function column(c)
  if type(c) == "string" then return {key = c, title = c} end
  if type(c) ~= "table" or c.key == nil then
    error("eldr.report: bad argument 'columns' (names or {key =, title =, fmt =} expected)", 3)
  end
  return {key = c.key, title = c.title or tostring(c.key), fmt = c.fmt}
end

local function columns_of(rows, columns)
  if columns == nil then
    -- the union of every row's keys, sorted: rows of a sweep differ (a
    -- baseline has no tau), and the first row must not decide
    local keys, seen = {}, {}
    for _, r in ipairs(rows) do
      for k, v in pairs(r) do
        if type(v) ~= "table" and not seen[k] then
          seen[k] = true
          keys[#keys + 1] = k
        end
      end
    end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    columns = keys
  end
  if type(columns) ~= "table" then
    error("eldr.report: bad argument 'columns' (list expected, got " .. type(columns) .. ")", 3)
  end
  local out = {}
  for i, c in ipairs(columns) do out[i] = column(c) end
  return out
end

--- report.number(x) -> string: a float as a person reads it. 4
--- significant digits, but never fewer than the integer part needs
--- (11430.4 -> "11430", not "1.143e+04"); fixed notation from 1e-4 up to
--- 1e15, an exponent outside it; trailing zeros dropped (0.30000000000000004
--- -> "0.3", 2.0 -> "2"); "nan", "inf", "-inf". Integers print whole.
function M.number(x)
  if math.type(x) ~= "float" then return tostring(x) end
  if x ~= x then return "nan" end
  if x == math.huge then return "inf" end
  if x == -math.huge then return "-inf" end
  if x == 0 then return "0" end
  local a = math.abs(x)
  if a < 1e-4 or a >= 1e15 then
    local s = string.format("%.3e", x)
    local m, e = s:match("^(.-)e(.*)$")
    m = m:gsub("(%..-)0+$", "%1"):gsub("%.$", "")
    return m .. "e" .. e
  end
  -- digits after the point for 4 significant ones; rounding may add a
  -- digit in front (9.9996 -> 10.00), which only drops a trailing zero
  local decimals = math.max(0, 3 - math.floor(math.log(a, 10)))
  local s = string.format("%." .. decimals .. "f", x)
  if decimals > 0 then s = s:gsub("0+$", ""):gsub("%.$", "") end
  if s == "-0" then s = "0" end
  return s
end

local function cell(c, v)
  if v == nil then return nil end
  if type(c.fmt) == "function" then return tostring(c.fmt(v)) end
  if c.fmt then return string.format(c.fmt, v) end
  if math.type(v) == "float" then return M.number(v) end
  return tostring(v)
end

local function check_rows(rows)
  if type(rows) ~= "table" then
    error("eldr.report: bad argument 'rows' (list of tables expected, got " .. type(rows) .. ")", 3)
  end
  for i, r in ipairs(rows) do
    if type(r) ~= "table" then
      error(string.format("eldr.report: bad argument 'rows[%d]' (table expected, got %s)",
                          i, type(r)), 3)
    end
  end
end

--- report.table(rows [, columns]) -> string: an aligned text table.
function M.table(rows, columns)
  check_rows(rows)
  local cols = columns_of(rows, columns)
  local width, numeric, text = {}, {}, {}
  for j, c in ipairs(cols) do
    width[j], numeric[j] = #c.title, true
  end
  for i, r in ipairs(rows) do
    text[i] = {}
    for j, c in ipairs(cols) do
      local v = r[c.key]
      local s = cell(c, v) or "-"
      if v ~= nil and type(v) ~= "number" then numeric[j] = false end
      text[i][j] = s
      if #s > width[j] then width[j] = #s end
    end
  end
  local function line(cells)
    local parts = {}
    for j, s in ipairs(cells) do
      local pad = string.rep(" ", width[j] - #s)
      parts[j] = numeric[j] and pad .. s or s .. pad
    end
    return (table.concat(parts, "  "):gsub("%s+$", ""))
  end
  local out, titles, rules = {}, {}, {}
  for j, c in ipairs(cols) do
    titles[j] = c.title
    rules[j] = string.rep("-", width[j])
  end
  out[1] = line(titles)
  out[2] = line(rules)
  for i = 1, #rows do out[#out + 1] = line(text[i]) end
  return table.concat(out, "\n")
end

--- report.print(rows [, columns]): print report.table.
function M.print(rows, columns)
  print(M.table(rows, columns))
end

local function csv_field(s)
  if s:find('[",\n\r]') then return '"' .. s:gsub('"', '""') .. '"' end
  return s
end

-- The shortest text that reads back as the same float (CSV is for
-- programs: every digit that matters, none that does not: 4.63, not
-- 4.6299999999999999).
local function exact(v)
  for _, p in ipairs({"%.15g", "%.16g"}) do
    local s = string.format(p, v)
    if tonumber(s) == v then return s end
  end
  return string.format("%.17g", v)
end

--- report.csv(rows [, columns [, path]]) -> string; with path, also
--- written atomically (a temporary renamed into place).
function M.csv(rows, columns, path)
  check_rows(rows)
  local cols = columns_of(rows, columns)
  local out, head = {}, {}
  for j, c in ipairs(cols) do head[j] = csv_field(c.title) end
  out[1] = table.concat(head, ",")
  for _, r in ipairs(rows) do
    local f = {}
    for j, c in ipairs(cols) do
      local v = r[c.key]
      if math.type(v) == "float" and not c.fmt then
        f[j] = exact(v)
      else
        f[j] = csv_field(cell(c, v) or "")
      end
    end
    out[#out + 1] = table.concat(f, ",")
  end
  local text = table.concat(out, "\n") .. "\n"
  if path ~= nil then
    if type(path) ~= "string" then
      error("eldr.report.csv: bad argument 'path' (string expected, got " .. type(path) .. ")", 2)
    end
    local tmp = path .. ".tmp"
    local f, err = io.open(tmp, "w")
    if not f then error("eldr.report.csv: " .. err, 2) end
    local ok, werr = f:write(text)
    f:close()
    if not ok then os.remove(tmp); error("eldr.report.csv: " .. tostring(werr), 2) end
    local rok, rerr = os.rename(tmp, path)
    if not rok then os.remove(tmp); error("eldr.report.csv: " .. tostring(rerr), 2) end
  end
  return text
end

M._help = {
  ["eldr.report.table"] = "eldr.report.table(rows [, columns]) -> string: an aligned text table "
    .. "(columns: names or {key, title, fmt})",
  ["eldr.report.print"] = "eldr.report.print(rows [, columns]): print eldr.report.table "
    .. "(default columns: every key of any row)",
  ["eldr.report.number"] = "eldr.report.number(x) -> string: a number as the tables print it "
    .. "(4 significant digits, no exponent for 1e-4..1e15, no trailing zeros)",
  ["eldr.report.csv"] = "eldr.report.csv(rows [, columns [, path]]) -> string: CSV, written "
    .. "atomically to path when given",
}

return M
