//! `t`: the processes as a tree, children under their parents. Pure: rows
//! in, rows with the branch drawn before each name out.

use crate::snapshot::Process;

/// `rows` (sorted) as a tree: each process under its parent, with the
/// ancestors of each row taken from `all` even where they are not rows (an
/// `ollama serve` holding no VRAM above its runner), each with the branch
/// drawn before its name. Siblings, and the roots, come in the order of the
/// heaviest row below them (their own included), so a subtree sorts where
/// its heaviest member would: an idle parent does not sink its busy child.
/// A parent link that loops (a forged recording) is cut where it closes:
/// every process appears once.
pub fn tree_order<'a>(rows: &[&'a Process], all: &'a [Process], ascii: bool) -> Vec<(&'a Process, String)> {
    use std::collections::{HashMap, HashSet};
    let by_pid: HashMap<u32, &Process> = all.iter().rev().map(|p| (p.pid, p)).collect();
    let mut nodes: Vec<&Process> = rows.to_vec();
    let mut index: HashMap<u32, usize> = nodes.iter().enumerate().map(|(i, p)| (p.pid, i)).collect();
    // Each row's missing ancestors, up to the first one already a node; a
    // loop closes on a node added before, so this ends.
    for row in rows {
        let mut up = row.ppid;
        while let Some(parent) = up
            .and_then(|pp| by_pid.get(&pp))
            .filter(|p| !index.contains_key(&p.pid))
        {
            index.insert(parent.pid, nodes.len());
            nodes.push(parent);
            up = parent.ppid;
        }
    }
    let parent: Vec<Option<usize>> = nodes
        .iter()
        .enumerate()
        .map(|(i, p)| p.ppid.and_then(|pp| index.get(&pp).copied()).filter(|&u| u != i))
        .collect();
    // The rank (place in `rows`) of the heaviest row at or below each node.
    // Rows are walked heaviest first, so a walk up stops at the first node
    // that already has as heavy a member: each node is set once.
    let mut heaviest = vec![usize::MAX; nodes.len()];
    for rank in 0..rows.len() {
        let mut at = Some(rank);
        while let Some(n) = at.filter(|&n| heaviest[n] > rank) {
            heaviest[n] = rank;
            at = parent[n];
        }
    }
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let mut roots = Vec::new();
    let mut by_weight: Vec<usize> = (0..nodes.len()).collect();
    by_weight.sort_by_key(|&n| heaviest[n]);
    for &n in &by_weight {
        match parent[n] {
            Some(up) => children[up].push(n),
            None => roots.push(n),
        }
    }
    let (branch, last, bar, blank) = if ascii {
        ("|- ", "`- ", "|  ", "   ")
    } else {
        ("├─ ", "└─ ", "│  ", "   ")
    };
    // Deeper than this the branches are not drawn further in (a forged
    // chain thousands deep must not cost thousands of columns a row).
    const DEEPEST: usize = 8 * 3;
    let mut out = Vec::with_capacity(nodes.len());
    let mut placed = HashSet::new();
    let mut unplaced = by_weight.iter().copied();
    // (node, the bars of its ancestors, its own branch)
    let mut stack: Vec<(usize, String, &str)> = roots.iter().rev().map(|&r| (r, String::new(), "")).collect();
    loop {
        while let Some((i, indent, own)) = stack.pop() {
            if !placed.insert(i) {
                continue;
            }
            out.push((nodes[i], format!("{indent}{own}")));
            let below = if own.is_empty() || indent.chars().count() >= DEEPEST {
                indent
            } else if own == last {
                format!("{indent}{blank}")
            } else {
                format!("{indent}{bar}")
            };
            let kids = &children[i];
            for (n, &k) in kids.iter().enumerate().rev() {
                stack.push((k, below.clone(), if n + 1 == kids.len() { last } else { branch }));
            }
        }
        // Nodes only a loop reaches: each such loop starts at its heaviest.
        match unplaced.find(|i| !placed.contains(i)) {
            Some(i) => stack.push((i, String::new(), "")),
            None => break,
        }
    }
    out
}
