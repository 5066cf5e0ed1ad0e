-- eldr.report - aligned text tables and CSV from lists of rows.
--
-- A row is a Lua table; columns name the keys to show, either as strings
-- or as {key = ..., title = ..., fmt = ...} (fmt: a string.format pattern
-- or a function(value) -> string). Numbers are right-aligned, text left;
-- floats print with 4 significant digits unless fmt says otherwise; a
-- missing value prints as "-" (text) or an empty field (CSV).
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
    -- every key of the first row, sorted
    local keys = {}
    for k, v in pairs(rows[1] or {}) do
      if type(v) ~= "table" then keys[#keys + 1] = k end
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

local function cell(c, v)
  if v == nil then return nil end
  if type(c.fmt) == "function" then return tostring(c.fmt(v)) end
  if c.fmt then return string.format(c.fmt, v) end
  if math.type(v) == "float" then
    if v ~= v then return "nan" end
    return string.format("%.4g", v)
  end
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
        f[j] = string.format("%.17g", v)
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
  ["eldr.report.print"] = "eldr.report.print(rows [, columns]): print eldr.report.table",
  ["eldr.report.csv"] = "eldr.report.csv(rows [, columns [, path]]) -> string: CSV, written "
    .. "atomically to path when given",
}

return M
