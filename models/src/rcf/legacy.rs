//! Reading tree and group snapshots, including those written before trees
//! kept their leaves in order, or before point handles were arena offsets
//! (checkpoint format 1 as written up to 2026-12-02).
//!
//! Part of the forest in `rcf/`: `Tree` deserializes through `TreeRepr`,
//! which accepts both layouts. An old tree named its leaves by slot (child
//! references with `LEAF_BIT` set, `leaf_point` / `leaf_mass` indexed by
//! slot), its nodes carried their mass, and its sample entries named leaf
//! slots. The conversion walks the old tree in order to lay out `leaves` and
//! `masses`, counts each node's left leaves, maps sample entries to point
//! handles and keeps the cached boxes the new rule wants. The old rule
//! cached every node of mass at least `box_min_mass`, a superset of the
//! nodes with that many leaves, so no box has to be recomputed (and no point
//! store is needed). Node indices and every value are kept, so a converted
//! forest continues exactly as the old build would have.
//!
//! A `Group` deserializes through `GroupRepr`: an old store's handles
//! indexed a table of offsets (`loc`), so the store moves its counts to rows
//! (`StoreRepr::into_store`) and the trees' leaves and sample entries get
//! the offsets.

use serde::Deserialize;

use super::forest::Group;
use super::point_store::{BadStore, StoreRepr};
use super::sampler::Sampler;
use super::tree::{LEAF, LEAF_BIT, NO_BOX, NONE, Node, Tree};
use crate::rng::Xoshiro256PlusPlus;

/// A node of either layout.
#[derive(Deserialize)]
struct NodeRepr {
    cut_value: f32,
    left: u16,
    right: u16,
    cut_dim: u16,
    #[serde(default)]
    left_leaves: u16,
}

/// A tree of either layout.
#[derive(Deserialize)]
pub(super) struct TreeRepr {
    dims: usize,
    box_min_mass: u16,
    root: u16,
    nodes: Vec<NodeRepr>,
    box_slot: Vec<u16>,
    free_node: u16,
    #[serde(default)]
    leaves: Option<Vec<u32>>,
    #[serde(default)]
    masses: Option<Vec<u16>>,
    /// Old layout: point handle per leaf slot.
    #[serde(default)]
    leaf_point: Option<Vec<u32>>,
    /// Old layout: mass per leaf slot (0 for a free slot).
    #[serde(default)]
    leaf_mass: Option<Vec<u16>>,
    boxes: Vec<f32>,
    /// Free box slots, listed by snapshots written before slots were kept
    /// dense. Not needed to read them: the first box change compacts the
    /// slots (`Tree::sync_box_owners`).
    #[serde(default, rename = "free_boxes")]
    _free_boxes: serde::de::IgnoredAny,
    sampler: Sampler,
    rng: Xoshiro256PlusPlus,
    full_norm: f64,
}

/// Why a tree snapshot cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("invalid tree snapshot: {0}")]
pub(super) struct BadTree(&'static str);

impl TryFrom<TreeRepr> for Tree {
    type Error = BadTree;

    fn try_from(r: TreeRepr) -> Result<Self, BadTree> {
        let nodes: Vec<Node> = r
            .nodes
            .iter()
            .map(|n| Node {
                cut_value: n.cut_value,
                left: n.left,
                right: n.right,
                cut_dim: n.cut_dim,
                left_leaves: n.left_leaves,
            })
            .collect();
        let mut tree = Tree {
            dims: r.dims,
            box_min_mass: r.box_min_mass,
            root: r.root,
            nodes,
            box_slot: r.box_slot,
            free_node: r.free_node,
            leaves: Vec::new(),
            masses: Default::default(),
            boxes: r.boxes.into(),
            box_owner: Vec::new(),
            sampler: r.sampler,
            rng: r.rng,
            full_norm: r.full_norm,
        };
        match (r.leaves, r.masses, r.leaf_point, r.leaf_mass) {
            (Some(leaves), Some(masses), None, None) => {
                if !tree.sampler.leaves.is_empty() {
                    return Err(BadTree("sample entries name leaf slots"));
                }
                tree.leaves = leaves;
                tree.masses = masses.into();
                Ok(tree)
            }
            (None, None, Some(slot_point), Some(slot_mass)) => {
                convert(&mut tree, &slot_point, &slot_mass)?;
                Ok(tree)
            }
            _ => Err(BadTree("neither the leaf order nor leaf slots")),
        }
    }
}

/// Rewrites `tree` (old child references, boxes cached by mass, sample
/// entries naming slots) into the leaf-order layout.
fn convert(tree: &mut Tree, slot_point: &[u32], slot_mass: &[u16]) -> Result<(), BadTree> {
    let mut walk = Walk {
        nodes: &mut tree.nodes,
        slot_point,
        slot_mass,
        leaves: Vec::new(),
        masses: Vec::new(),
        visits: 0,
        counts: Vec::new(),
    };
    tree.root = match tree.root {
        NONE => LEAF,
        r => {
            walk.visit(r)?;
            if r & LEAF_BIT != 0 { LEAF } else { r }
        }
    };
    let Walk {
        leaves,
        masses,
        counts,
        ..
    } = walk;
    tree.leaves = leaves;
    tree.masses = masses.into();
    // Keep the boxes of nodes with enough leaves, in post-order, densely.
    let width = 2 * tree.dims;
    let mut boxes = Vec::new();
    let mut box_slot = vec![NO_BOX; tree.nodes.len()];
    for (n, count) in counts {
        if count < tree.box_min_mass {
            continue;
        }
        let old = *tree
            .box_slot
            .get(usize::from(n))
            .ok_or(BadTree("box slot of a missing node"))?;
        let at = usize::from(old) * width;
        let b = tree
            .boxes
            .get(at..at + width)
            .filter(|_| old != NO_BOX)
            .ok_or(BadTree("a node of enough mass has no cached box"))?;
        box_slot[usize::from(n)] = (boxes.len() / width.max(1)) as u16;
        boxes.extend_from_slice(b);
    }
    if box_slot.len() != tree.box_slot.len() {
        return Err(BadTree("box slots and nodes differ in number"));
    }
    tree.boxes = boxes.into();
    tree.box_slot = box_slot;
    let points = tree
        .sampler
        .leaves
        .iter()
        .map(|&s| slot_point.get(usize::from(s)).copied())
        .collect::<Option<Vec<u32>>>()
        .ok_or(BadTree("a sample entry names a missing leaf slot"))?;
    tree.sampler.set_points(points);
    Ok(())
}

/// An in-order walk of an old tree.
struct Walk<'a> {
    nodes: &'a mut [Node],
    slot_point: &'a [u32],
    slot_mass: &'a [u16],
    leaves: Vec<u32>,
    masses: Vec<u16>,
    visits: usize,
    /// Every internal node with its leaf count, children before parents.
    counts: Vec<(u16, u16)>,
}

impl Walk<'_> {
    /// Lays out the leaves of the subtree at old reference `r`, rewrites
    /// its nodes' child references and left counts; returns its leaf count.
    fn visit(&mut self, r: u16) -> Result<u16, BadTree> {
        self.visits += 1;
        if self.visits > 2 * self.nodes.len() + 2 {
            return Err(BadTree("a cycle"));
        }
        if r & LEAF_BIT != 0 {
            let slot = usize::from(r & !LEAF_BIT);
            let (Some(&h), Some(&m)) = (self.slot_point.get(slot), self.slot_mass.get(slot)) else {
                return Err(BadTree("a child names a missing leaf slot"));
            };
            self.leaves.push(h);
            self.masses.push(m);
            return Ok(1);
        }
        let i = usize::from(r);
        let node = *self
            .nodes
            .get(i)
            .ok_or(BadTree("a child names a missing node"))?;
        let left = self.visit(node.left)?;
        let right = self.visit(node.right)?;
        let child = |c: u16| if c & LEAF_BIT != 0 { LEAF } else { c };
        self.nodes[i].left = child(node.left);
        self.nodes[i].right = child(node.right);
        self.nodes[i].left_leaves = left;
        let count = left.checked_add(right).ok_or(BadTree("too many leaves"))?;
        self.counts.push((r, count));
        Ok(count)
    }
}

/// A stored group of trees and their point store. Before point handles were
/// arena offsets (checkpoint format 1 as written up to 2026-12-02) a handle
/// indexed the store's table `loc`; such a group's trees get the offsets.
#[derive(Deserialize)]
pub(super) struct GroupRepr {
    store: StoreRepr,
    trees: Vec<Tree>,
}

/// Location of a free handle in the old handle table.
const FREE_HANDLE: u32 = u32::MAX;

impl TryFrom<GroupRepr> for Group {
    type Error = BadStore;

    fn try_from(r: GroupRepr) -> Result<Self, BadStore> {
        let (store, loc) = r.store.into_store()?;
        let mut g = Group {
            store,
            trees: r.trees,
        };
        if let Some(loc) = loc {
            let offset = |h: u32| loc.get(h as usize).copied().filter(|&l| l != FREE_HANDLE);
            let mut bad = false;
            for t in &mut g.trees {
                t.map_handles(|h| {
                    offset(h).unwrap_or_else(|| {
                        bad = true;
                        u32::MAX
                    })
                });
            }
            if bad {
                return Err(BadStore("a leaf names no stored point"));
            }
        }
        Ok(g)
    }
}
