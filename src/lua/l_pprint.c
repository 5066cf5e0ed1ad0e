/* l_pprint.c - eldr.pp: pretty-print any Lua value to a string, with
 * limits on depth and width, for the REPL and for scripts. Written in Lua
 * (a chunk compiled at module load) because it walks Lua tables and calls
 * __tostring, which may raise: in Lua an error there cannot leak C memory.
 *
 * Rules: strings quoted (%q); integers and floats as Lua prints them;
 * userdata and tables with __tostring through it; a table prints its
 * sequence part in order, then the other keys sorted (numbers, then
 * strings, then the rest by their text); identifier keys bare, others in
 * brackets; at most `width` entries per table ("... N more"), `depth`
 * levels ("{...}" below), cycles as "<cycle>"; one line when the result
 * fits in 78 columns, else short scalars packed several to a line and
 * other entries one per line, indented. */
#include "l_types.h"
#include "l_util.h"

static const char PP_SRC[] =
    "local depth_max, width_max = ...\n"
    "local fmt, concat, sort, rep = string.format, table.concat, table.sort, string.rep\n"
    "local function keyorder(a, b)\n"
    "  local ta, tb = type(a), type(b)\n"
    "  if ta ~= tb then\n"
    "    if ta == 'number' then return true elseif tb == 'number' then return false end\n"
    "    if ta == 'string' then return true elseif tb == 'string' then return false end\n"
    "    return ta < tb\n"
    "  end\n"
    "  if ta == 'number' or ta == 'string' then return a < b end\n"
    "  return tostring(a) < tostring(b)\n"
    "end\n"
    "local function scalar(v)\n"
    "  local t = type(v)\n"
    "  if t == 'string' then return (fmt('%q', v):gsub('\\\\\\n', '\\\\n')) end\n"
    "  if t == 'table' or t == 'userdata' then\n"
    "    local mt = getmetatable(v)\n"
    "    if type(mt) == 'table' and rawget(mt, '__tostring') then return tostring(v) end\n"
    "  end\n"
    "  if t ~= 'table' then return tostring(v) end\n"
    "end\n"
    "local function render(v, depth, seen, indent, dmax, wmax)\n"
    "  local s = scalar(v)\n"
    "  if s then return s end\n"
    "  if seen[v] then return '<cycle>' end\n"
    "  if depth >= dmax then return next(v) == nil and '{}' or '{...}' end\n"
    "  seen[v] = true\n"
    "  local items, n, count = {}, #v, 0\n"
    "  local keys = {}\n"
    "  for k in pairs(v) do\n"
    "    if not (math.type(k) == 'integer' and k >= 1 and k <= n) then keys[#keys + 1] = k end\n"
    "  end\n"
    "  sort(keys, keyorder)\n"
    "  local total = n + #keys\n"
    "  local inner = indent .. '  '\n"
    "  for i = 1, n do\n"
    "    if count >= wmax then break end\n"
    "    count = count + 1\n"
    "    items[count] = render(v[i], depth + 1, seen, inner, dmax, wmax)\n"
    "  end\n"
    "  for _, k in ipairs(keys) do\n"
    "    if count >= wmax then break end\n"
    "    count = count + 1\n"
    "    local ks = type(k) == 'string' and k:match('^[%a_][%w_]*$') and k\n"
    "               or '[' .. render(k, dmax, seen, inner, dmax, wmax) .. ']'\n"
    "    items[count] = ks .. ' = ' .. render(v[k], depth + 1, seen, inner, dmax, wmax)\n"
    "  end\n"
    "  seen[v] = nil\n"
    "  if total > count then items[count + 1] = fmt('... %d more', total - count) end\n"
    "  if #items == 0 then return '{}' end\n"
    "  local one = '{' .. concat(items, ', ') .. '}'\n"
    "  if #one + #indent <= 78 and not one:find('\\n') then return one end\n"
    "  local packed, short = {}, true\n"
    "  for _, it in ipairs(items) do\n"
    "    if #it > 24 or it:find('[\\n{]') then short = false break end\n"
    "  end\n"
    "  if short then\n"
    "    local line = ''\n"
    "    for i, it in ipairs(items) do\n"
    "      local piece = it .. (i < #items and ',' or '')\n"
    "      if #line > 0 and #line + 1 + #piece + #inner > 78 then\n"
    "        packed[#packed + 1] = line\n"
    "        line = piece\n"
    "      else\n"
    "        line = #line > 0 and line .. ' ' .. piece or piece\n"
    "      end\n"
    "    end\n"
    "    packed[#packed + 1] = line\n"
    "    return '{\\n' .. inner .. concat(packed, '\\n' .. inner) .. '\\n' .. indent .. '}'\n"
    "  end\n"
    "  return '{\\n' .. inner .. concat(items, ',\\n' .. inner) .. '\\n' .. indent .. '}'\n"
    "end\n"
    "return function(v, opts)\n"
    "  local d, w = depth_max, width_max\n"
    "  if opts ~= nil then\n"
    "    if type(opts) ~= 'table' then\n"
    "      error(\"eldr.pp: bad argument 'options' (table expected, got \" .. type(opts) .. ')', 2)\n"
    "    end\n"
    "    for k in pairs(opts) do\n"
    "      if k ~= 'depth' and k ~= 'width' then\n"
    "        error(\"eldr.pp: unknown option '\" .. tostring(k) .. \"' (known: depth, width)\", 2)\n"
    "      end\n"
    "    end\n"
    "    d = opts.depth or d\n"
    "    w = opts.width or w\n"
    "    if math.type(d) ~= 'integer' or d < 0 then\n"
    "      error(\"eldr.pp: bad argument 'depth' (integer >= 0 expected)\", 2)\n"
    "    end\n"
    "    if math.type(w) ~= 'integer' or w < 1 then\n"
    "      error(\"eldr.pp: bad argument 'width' (integer >= 1 expected)\", 2)\n"
    "    end\n"
    "  end\n"
    "  return render(v, 0, {}, '', d, w)\n"
    "end\n";

#define PP_DEPTH 4
#define PP_WIDTH 24

void l_open_pprint(lua_State *L)
{
    if (luaL_loadbuffer(L, PP_SRC, sizeof PP_SRC - 1, "=eldr.pp") != LUA_OK)
        lua_error(L); /* a bug in the chunk above: fail loudly at startup */
    lua_pushinteger(L, PP_DEPTH);
    lua_pushinteger(L, PP_WIDTH);
    lua_call(L, 2, 1);
    lua_setfield(L, -2, "pp");
    l_sethelp(L, "eldr.pp", "eldr.pp(value [, {depth = 4, width = 24}]) -> string: the value "
                            "pretty-printed (what the REPL shows)");
}

void l_pprint(lua_State *L, int idx, int depth, int width)
{
    idx = lua_absindex(L, idx);
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_getfield(L, -1, "eldr");
    lua_getfield(L, -1, "pp");
    lua_pushvalue(L, idx);
    lua_createtable(L, 0, 2);
    lua_pushinteger(L, depth);
    lua_setfield(L, -2, "depth");
    lua_pushinteger(L, width);
    lua_setfield(L, -2, "width");
    lua_call(L, 2, 1);
    lua_replace(L, -3);
    lua_pop(L, 1);
}
