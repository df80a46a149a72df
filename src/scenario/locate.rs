//! Finds the line and column of a field path (`workload[1].incast.senders`) in YAML text,
//! so that errors found after parsing still point at the file position.
//!
//! It is a best-effort scanner for the block and flow styles scenarios use (nested
//! mappings, `- ` list items, one-line `{ a: 1, b: 2 }` maps); when a segment cannot be
//! found it returns the position of the deepest one that was.

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// Splits `a.b[2].c` (or `a.b.2.c`) into segments; an index that is not a number is an
/// error.
pub fn parse_path(path: &str) -> Result<Vec<Seg>, String> {
    let mut segs = Vec::new();
    for part in path.split('.') {
        let mut rest = part;
        if rest.is_empty() {
            return Err(format!("empty segment in field path `{path}`"));
        }
        while !rest.is_empty() {
            if let Some(open) = rest.find('[') {
                if open > 0 {
                    segs.push(key_or_index(&rest[..open]));
                }
                let close = rest[open..]
                    .find(']')
                    .map(|c| c + open)
                    .ok_or_else(|| format!("unclosed `[` in field path `{path}`"))?;
                let idx = &rest[open + 1..close];
                let i = idx.parse().map_err(|_| {
                    format!("`[{idx}]` in field path `{path}` is not a list index (0, 1, 2, ...)")
                })?;
                segs.push(Seg::Index(i));
                rest = &rest[close + 1..];
            } else {
                segs.push(key_or_index(rest));
                rest = "";
            }
        }
    }
    Ok(segs)
}

fn key_or_index(s: &str) -> Seg {
    match s.parse::<usize>() {
        Ok(i) => Seg::Index(i),
        Err(_) => Seg::Key(s.to_string()),
    }
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn is_content(line: &str) -> bool {
    let t = line.trim();
    !t.is_empty() && !t.starts_with('#')
}

/// Finds `key:` in `line` at or after byte `from`, as a whole key.
fn find_key(line: &str, key: &str, from: usize) -> Option<usize> {
    let pat = format!("{key}:");
    let mut start = from;
    while let Some(pos) = line.get(start..)?.find(&pat) {
        let at = start + pos;
        let before = line[..at].chars().last();
        if matches!(before, None | Some(' ') | Some('{') | Some(',') | Some('-')) {
            return Some(at);
        }
        start = at + 1;
    }
    None
}

/// 1-based (line, column) of the value at `path`, or of its deepest found ancestor.
pub fn locate(text: &str, path: &str) -> Option<(usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let segs = parse_path(path).ok()?;
    // Current position: line index, column, and the indentation its children exceed.
    let mut line = 0usize;
    let mut col = 0usize;
    let mut parent_indent: isize = -1;
    let mut found: Option<(usize, usize)> = None;
    let mut after_index = false;
    for seg in &segs {
        let mut hit = None;
        match seg {
            Seg::Key(k) => {
                // Same line first (flow maps, or the key after `- `).
                if found.is_some() {
                    // After a list index the item's first key starts at `col`; after a
                    // key, look past it.
                    let from = if after_index { col } else { col + 1 };
                    if let Some(c) = find_key(lines.get(line)?, k, from) {
                        hit = Some((line, c));
                    }
                }
                if hit.is_none() {
                    let first = if found.is_some() { line + 1 } else { 0 };
                    for (i, l) in lines.iter().enumerate().skip(first) {
                        if !is_content(l) {
                            continue;
                        }
                        let ind = indent_of(l) as isize;
                        if ind <= parent_indent {
                            break;
                        }
                        let body = l.trim_start();
                        let body = body.strip_prefix("- ").unwrap_or(body);
                        if body.starts_with(&format!("{k}:")) {
                            let c = l.len() - body.len();
                            hit = Some((i, c));
                            break;
                        }
                    }
                }
                let Some((l, c)) = hit else { return found };
                line = l;
                col = c;
                parent_indent = indent_of(lines[l]) as isize;
                if lines[l].trim_start().starts_with("- ") {
                    // A key written after `- `: its children are indented past the key.
                    parent_indent = c as isize;
                }
            }
            Seg::Index(n) => {
                let first = if found.is_some() { line + 1 } else { 0 };
                let mut count = 0usize;
                let mut list_indent: Option<usize> = None;
                // A flow list `[a, b]` on the current line: point at the line.
                if let Some(l) = lines.get(line) {
                    if found.is_some() && l[col..].contains('[') {
                        hit = Some((line, col));
                    }
                }
                if hit.is_none() {
                    for (i, l) in lines.iter().enumerate().skip(first) {
                        if !is_content(l) {
                            continue;
                        }
                        let ind = indent_of(l);
                        if (ind as isize) < parent_indent
                            || (ind as isize == parent_indent && !l.trim_start().starts_with("- "))
                        {
                            break;
                        }
                        if l.trim_start().starts_with("- ") {
                            let li = *list_indent.get_or_insert(ind);
                            if ind == li {
                                if count == *n {
                                    hit = Some((i, ind + 2));
                                    break;
                                }
                                count += 1;
                            }
                        }
                    }
                }
                let Some((l, c)) = hit else { return found };
                line = l;
                col = c;
                parent_indent = c as isize - 1;
            }
        }
        found = Some((line + 1, col + 1));
        after_index = matches!(seg, Seg::Index(_));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "name: x
topology:
  leaves: 4
  host_link: { rate: 200Gbps, latency: 200ns }
switch:
  buffer: 32MiB
workload:
  - permutation: { size: 2MB }
  - incast:
      senders: 8
      receiver: 0
  - flows:
      - { src: 0, dst: 9, size: 64KB }
      - { src: 1, dst: 99, size: 64KB }
";

    #[test]
    fn finds_nested_keys_and_list_items() {
        assert_eq!(locate(DOC, "topology.leaves"), Some((3, 3)));
        assert_eq!(locate(DOC, "topology.host_link.latency"), Some((4, 31)));
        assert_eq!(locate(DOC, "switch.buffer"), Some((6, 3)));
        assert_eq!(locate(DOC, "workload[1].incast.senders"), Some((10, 7)));
        assert_eq!(locate(DOC, "workload[0].permutation.size"), Some((8, 20)));
        assert_eq!(locate(DOC, "workload[2].flows[1].dst"), Some((14, 19)));
        assert_eq!(locate(DOC, "workload.2.flows.1.dst"), Some((14, 19)));
    }

    #[test]
    fn missing_paths_fall_back_to_the_deepest_found() {
        assert_eq!(locate(DOC, "switch.alpha"), Some((5, 1)));
        assert_eq!(locate(DOC, "nothing"), None);
    }
}
