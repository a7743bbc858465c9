# call-loops.awk CALL_LOOPS_TXT CALLS - the loops between concerns in the
# calls of one layer (check-layers.sh runs it from runtime/).
#
# CALL_LOOPS_TXT is tools/call-loops.txt ("concern" and "loop" lines; it says
# what they mean). CALLS has one line per pair of modules, "FROM TO SYMBOL":
# FROM names SYMBOL, which TO defines. Within a layer, the modules that reach
# each other through calls (a strongly connected component) form a loop;
# modules of one concern count as one. Prints every loop, with one call per
# step for a new or grown one (for every one with -v explain=1), and exits 1
# when a loop is new or has grown beyond its "loop" line.

function layer_of(m) { return substr(m, 1, index(m, "/") - 1) }

# Sorts a[1..n] in place (insertion sort: tens of names at most).
function sort_list(a, n,    i, j, v) {
  for (i = 2; i <= n; i++) {
    v = a[i]
    for (j = i - 1; j >= 1 && a[j] > v; j--) a[j + 1] = a[j]
    a[j + 1] = v
  }
}

function join(a, n,    s, i) {
  s = ""
  for (i = 1; i <= n; i++) s = s (i > 1 ? " " : "") a[i]
  return s
}

function fail_line(text) { print "tools/call-loops.txt:" FNR ": " text; bad_file = 1 }

FILENAME == ARGV[1] {
  sub(/#.*/, "")
  if (NF == 0) next
  if ($1 != "concern" && $1 != "loop") { fail_line("\"" $1 "\": a line is \"concern MODULE...\" or \"loop MODULE...\""); next }
  if (NF < 3) { fail_line("a " $1 " names two modules or more"); next }
  for (i = 2; i <= NF; i++) {
    if ($i !~ /^(os|core|transport|app|cli)\/[A-Za-z0-9_]+$/) { fail_line("\"" $i "\" is not a module (layer/name, as app/vm for runtime/app/vm.c)"); next }
    if (layer_of($i) != layer_of($2)) { fail_line("a " $1 " is within one layer: " $2 " and " $i " are not"); next }
  }
  if ($1 == "concern") {
    for (i = 2; i <= NF; i++) {
      # A concern names files that are there: a stale line would hide a loop.
      if ((getline junk < ($i ".c")) < 0) { fail_line($i ".c: no such file (a concern names the files it is made of)"); continue }
      close($i ".c")
      if ($i in concern_of) { fail_line($i " is in two concerns"); continue }
      concern_of[$i] = $2
    }
  } else {
    loops_listed++
    listed_text[loops_listed] = ""
    for (i = 2; i <= NF; i++) {
      listed[loops_listed, $i] = 1
      listed_text[loops_listed] = listed_text[loops_listed] (i > 2 ? " " : "") $i
    }
    listed_size[loops_listed] = NF - 1
    listed_layer[loops_listed] = layer_of($2)
  }
  next
}

{
  from = $1; to = $2
  if (layer_of(from) != layer_of(to)) next
  a = (from in concern_of) ? concern_of[from] : from
  b = (to in concern_of) ? concern_of[to] : to
  if (a == b) next
  for (k = 1; k <= 2; k++) {
    c = k == 1 ? a : b
    if (!(c in node_index)) { nodes++; node[nodes] = c; node_index[c] = nodes }
  }
  i = node_index[a]; j = node_index[b]
  if (!((i, j) in reach)) { reach[i, j] = 1; why[i, j] = from " -> " to " (" $3 ")" }
}

END {
  # Which concern reaches which (Warshall: a hundred modules at most).
  for (k = 1; k <= nodes; k++)
    for (i = 1; i <= nodes; i++)
      if ((i, k) in reach)
        for (j = 1; j <= nodes; j++)
          if ((k, j) in reach) reach[i, j] = 1

  # The modules of each concern, to name a loop by its files.
  for (m in concern_of) members[concern_of[m]] = members[concern_of[m]] " " m

  failed = bad_file
  for (i = 1; i <= nodes; i++) {
    if (i in in_loop) continue
    n = 0; size = 0
    split("", comp); split("", files)
    for (j = 1; j <= nodes; j++)
      if (j == i || (((i, j) in reach) && ((j, i) in reach))) { comp[++n] = j; in_loop[j] = 1 }
    if (n < 2) continue
    for (c = 1; c <= n; c++) {
      name = node[comp[c]]
      if (name in members) { split(members[name], parts, " "); for (p in parts) files[++size] = parts[p] }
      else files[++size] = name
    }
    sort_list(files, size)
    layer = layer_of(files[1])
    loops[layer]++; loop_files[layer] += size

    # The "loop" line that holds it, if any.
    holder = 0
    for (k = 1; k <= loops_listed && !holder; k++) {
      whole = listed_layer[k] == layer
      for (f = 1; f <= size && whole; f++) if (!((k, files[f]) in listed)) whole = 0
      if (whole) holder = k
    }
    if (holder) {
      if (size == listed_size[holder]) exact[holder] = 1
      else smaller[holder] = smaller[holder] "; " join(files, size)
      out[layer] = out[layer] "call loop in " layer "/ between " size " files (listed in tools/call-loops.txt; it may only shrink): " join(files, size) "\n"
      show = explain
    } else {
      show = 1
      failed = 1
      grown = ""
      for (k = 1; k <= loops_listed; k++)
        for (f = 1; f <= size; f++) if ((k, files[f]) in listed) grown = k
      if (grown != "") {
        outgrown[grown] = 1
        extra = ""
        for (f = 1; f <= size; f++) if (!((grown, files[f]) in listed)) extra = extra " " files[f]
        out[layer] = out[layer] "call loop in " layer "/ has grown beyond tools/call-loops.txt (" listed_text[grown] "): now also" extra "\n"
      } else {
        out[layer] = out[layer] "NEW call loop in " layer "/ between " join(files, size) ": a file of one concern calls a file of another, which calls back\n"
      }
      out[layer] = out[layer] "  (a file must not call back by name into one that calls it: hand it a function pointer or a registration; files that are one concern split in two may be named a \"concern\" in tools/call-loops.txt)\n"
    }
    # One call per step, so the loop can be seen and cut.
    if (show)
      for (a = 1; a <= n; a++)
        for (b = 1; b <= n; b++)
          if ((comp[a], comp[b]) in why) out[layer] = out[layer] "    " why[comp[a], comp[b]] "\n"
  }
  split("os core transport app cli", layers, " ")
  for (l = 1; l <= 5; l++) printf "%s", out[layers[l]]

  for (k = 1; k <= loops_listed; k++) {
    if (exact[k] || outgrown[k]) continue
    print "tools/call-loops.txt lists a loop that has shrunk: lower it (\"loop " listed_text[k] "\" is now " (smaller[k] != "" ? substr(smaller[k], 3) : "gone") ")"
  }
  for (k = 1; k <= loops_listed; k++) { allowed_loops[listed_layer[k]]++; allowed_files[listed_layer[k]] += listed_size[k] }
  line = ""
  for (l = 1; l <= 5; l++) {
    L = layers[l]
    line = line sprintf("%s%s/ %d (%d files, listed %d)", l > 1 ? ", " : "", L, loops[L] + 0, loop_files[L] + 0, allowed_loops[L] + 0)
  }
  print "call loops between concerns: " line
  exit failed
}
