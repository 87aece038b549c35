//! The structure a PDF's parser walks, checked before it does: the page tree (a tree, not too deep)
//! and the content it will interpret, forms included.
//!
//! A page draws a form (a Form XObject) with `Do`, and the parser reads the form's content again at
//! every `Do`, forms within forms too. So a form drawn a million times, forms drawing each other ten
//! times over ten levels, or a form that draws itself (which would recurse until the stack
//! overflows, ending the process) cost far more than the file's streams expand to. This walk follows
//! the `Do`s as the parser will (resources inherited from the page tree, a form's own resources or
//! its caller's), counting each form's content once per drawing, and remembering each form's cost so
//! that the walk itself stays linear.

use std::collections::{HashMap, HashSet};

use pdf_extract::{Dictionary, Document, Object, ObjectId, content::Content};

use super::pdf_streams::{MAX_PDF_PAGE_CONTENT_BYTES, PdfError, stream_size};

/// How deep forms may nest (a form drawing a form ... ), 32.
pub const MAX_FORM_DEPTH: usize = 32;

/// The bytes of content the parser interprets for all pages of `doc`, each form counted once per
/// drawing. Errors: [`PdfError::Expands`] past `bound`; [`PdfError::PageExpands`] for a form whose own
/// content passes [`MAX_PDF_PAGE_CONTENT_BYTES`]; [`PdfError::Unreadable`] for a form that draws
/// itself or forms nested deeper than [`MAX_FORM_DEPTH`].
pub(super) fn interpreted_size(doc: &Document, bound: u64) -> Result<u64, PdfError> {
    let mut walk = Walk { doc, bound, total: 0, costs: HashMap::new(), drawing: HashSet::new() };
    for page in doc.get_pages().into_values() {
        let Ok(content) = doc.get_page_content(page) else { continue };
        let resources = doc.get_dictionary(page).ok().and_then(|dict| inherited_resources(doc, dict));
        let cost = walk.cost(&content, resources, 0)?;
        walk.add(cost)?;
    }
    Ok(walk.total)
}

struct Walk<'a> {
    doc: &'a Document,
    bound: u64,
    total: u64,
    /// The cost of drawing a form once, by the form and the resources it is drawn with.
    costs: HashMap<(ObjectId, usize), u64>,
    /// The forms being drawn, outermost first.
    drawing: HashSet<ObjectId>,
}

impl<'a> Walk<'a> {
    fn add(&mut self, cost: u64) -> Result<(), PdfError> {
        self.total = self.total.saturating_add(cost);
        if self.total > self.bound { Err(PdfError::Expands) } else { Ok(()) }
    }

    /// The cost of interpreting `content` with `resources` once: its length and that of every form
    /// it draws.
    fn cost(&mut self, content: &[u8], resources: Option<&'a Dictionary>, depth: usize) -> Result<u64, PdfError> {
        let mut cost = content.len() as u64;
        // Content the parser cannot decode ends its reading (an error the upload answers).
        let Ok(decoded) = Content::decode(content) else { return Ok(cost) };
        for operation in decoded.operations.iter().filter(|op| op.operator == "Do") {
            let Some(form) = operation.operands.first().and_then(|name| name.as_name().ok()) else { continue };
            let Some(id) = resources.and_then(|r| self.xobject(r, form)) else { continue };
            cost = cost.saturating_add(self.form_cost(id, resources, depth + 1)?);
            if cost > self.bound {
                return Err(PdfError::Expands);
            }
        }
        Ok(cost)
    }

    /// The cost of drawing the form `id` once, from content drawn with `caller`'s resources.
    fn form_cost(&mut self, id: ObjectId, caller: Option<&'a Dictionary>, depth: usize) -> Result<u64, PdfError> {
        if depth > MAX_FORM_DEPTH {
            return Err(PdfError::Unreadable(format!("the PDF nests forms deeper than {MAX_FORM_DEPTH}")));
        }
        if self.drawing.contains(&id) {
            return Err(PdfError::Unreadable("a form of the PDF draws itself".into()));
        }
        let Ok(Object::Stream(stream)) = self.doc.get_object(id) else { return Ok(0) };
        let own = stream.dict.get(b"Resources").ok().and_then(|r| self.dictionary(r));
        let resources = own.or(caller);
        let key = (id, resources.map_or(0, |r| r as *const Dictionary as usize));
        if let Some(cost) = self.costs.get(&key) {
            return Ok(*cost);
        }
        stream_size(stream, MAX_PDF_PAGE_CONTENT_BYTES)
            .map_err(|err| if err == PdfError::Expands { PdfError::PageExpands } else { err })?;
        let content = stream.decompressed_content().unwrap_or_else(|_| stream.content.clone());
        self.drawing.insert(id);
        let cost = self.cost(&content, resources, depth);
        self.drawing.remove(&id);
        let cost = cost?;
        self.costs.insert(key, cost);
        Ok(cost)
    }

    /// The object the XObject `name` of `resources` is.
    fn xobject(&self, resources: &'a Dictionary, name: &[u8]) -> Option<ObjectId> {
        let xobjects = self.dictionary(resources.get(b"XObject").ok()?)?;
        xobjects.get(name).ok()?.as_reference().ok()
    }

    /// `object` as a dictionary, following one reference.
    fn dictionary(&self, object: &'a Object) -> Option<&'a Dictionary> {
        match object {
            Object::Reference(id) => self.doc.get_dictionary(*id).ok(),
            other => other.as_dict().ok(),
        }
    }
}

/// How deep the page tree may be, 64 (a page's chain of `Parent`s).
pub const MAX_PAGE_TREE_DEPTH: usize = 64;

/// Refuses a page tree that is not a tree: a node reached twice from the root (the parser would
/// enumerate its pages again at every path, exponentially many), or a page whose chain of `Parent`s
/// loops or passes [`MAX_PAGE_TREE_DEPTH`] (the parser follows it by recursion for inherited
/// attributes, until the stack overflows). Errors: [`PdfError::Unreadable`] naming which.
pub(super) fn check_page_tree(doc: &Document) -> Result<(), PdfError> {
    let bad = |why: &str| PdfError::Unreadable(format!("the PDF's page tree {why}"));
    let Ok(root) = doc.catalog().and_then(|catalog| catalog.get(b"Pages")).and_then(Object::as_reference) else {
        return Ok(());
    };
    let (mut seen, mut stack, mut pages) = (HashSet::new(), vec![root], Vec::new());
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            return Err(bad("reaches a node twice"));
        }
        let Ok(node) = doc.get_dictionary(id) else { continue };
        match node.get(b"Kids").and_then(Object::as_array) {
            Ok(kids) => stack.extend(kids.iter().filter_map(|kid| kid.as_reference().ok())),
            Err(_) => pages.push(node),
        }
    }
    for page in pages {
        let (mut node, mut chain) = (page, HashSet::new());
        while let Ok(parent) = node.get(b"Parent").and_then(Object::as_reference) {
            if !chain.insert(parent) {
                return Err(bad("has a page whose parents loop"));
            }
            if chain.len() > MAX_PAGE_TREE_DEPTH {
                return Err(bad(&format!("is deeper than {MAX_PAGE_TREE_DEPTH}")));
            }
            let Ok(next) = doc.get_dictionary(parent) else { break };
            node = next;
        }
    }
    Ok(())
}

/// A page's resources: its own, or the nearest of its ancestors' in the page tree.
fn inherited_resources<'a>(doc: &'a Document, page: &'a Dictionary) -> Option<&'a Dictionary> {
    let mut node = page;
    for _ in 0..64 {
        if let Ok(resources) = node.get(b"Resources") {
            return match resources {
                Object::Reference(id) => doc.get_dictionary(*id).ok(),
                other => other.as_dict().ok(),
            };
        }
        node = doc.get_dictionary(node.get(b"Parent").ok()?.as_reference().ok()?).ok()?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use pdf_extract::{Stream, content::Operation};

    /// A document of one page whose content is `page`, with the forms `forms` (name, content).
    fn document(page: &str, forms: &[(&str, &str)]) -> Document {
        super::super::test_pdf::one_page(Stream::new(Dictionary::new(), page.as_bytes().to_vec()), forms)
    }

    fn draws(name: &str, times: usize) -> String {
        let op = Operation::new("Do", vec![Object::Name(name.as_bytes().to_vec())]);
        let content = Content { operations: vec![op; times] };
        String::from_utf8(content.encode().expect("encodes")).expect("ASCII")
    }

    #[test]
    fn a_form_counts_once_per_drawing() {
        let doc = document(&draws("F", 3), &[("F", "BT (hello) Tj ET")]);
        let form = "BT (hello) Tj ET".len() as u64;
        // The page's content as the parser reads it (its streams joined).
        let page_id = *doc.get_pages().values().next().expect("a page");
        let page = doc.get_page_content(page_id).expect("content").len() as u64;
        assert_eq!(interpreted_size(&doc, u64::MAX), Ok(page + 3 * form));
    }

    #[test]
    fn forms_drawing_each_other_over_and_over_are_refused_past_the_bound_without_walking_them_all() {
        // Ten levels of ten drawings each: 10^10 drawings of the innermost form.
        let mut forms: Vec<(String, String)> =
            (0..10).map(|i| (format!("L{i}"), draws(&format!("L{}", i + 1), 10))).collect();
        forms.push(("L10".into(), "BT (deep) Tj ET".into()));
        let forms: Vec<(&str, &str)> = forms.iter().map(|(n, c)| (n.as_str(), c.as_str())).collect();
        let doc = document(&draws("L0", 1), &forms);
        assert_eq!(interpreted_size(&doc, 64 * 1024 * 1024), Err(PdfError::Expands));
    }

    #[test]
    fn a_form_that_draws_itself_is_refused_instead_of_recursing() {
        let doc = document(&draws("A", 1), &[("A", &draws("B", 1)), ("B", &draws("A", 1))]);
        assert!(matches!(interpreted_size(&doc, u64::MAX), Err(PdfError::Unreadable(m)) if m.contains("draws itself")));
        // Read whole, the file is refused the same way: `pdf`'s tests.
    }

    #[test]
    fn a_page_tree_that_is_not_a_tree_is_refused() {
        let doc = document("BT (hello) Tj ET", &[]);
        assert_eq!(check_page_tree(&doc), Ok(()));
        let pages = doc.catalog().unwrap().get(b"Pages").unwrap().as_reference().unwrap();
        let page = doc.get_pages()[&1];
        // The pages node lists itself among its kids: reached twice.
        let mut twice = doc.clone();
        let mut tree = twice.get_dictionary(pages).unwrap().clone();
        tree.set("Kids", Object::Array(vec![Object::Reference(page), Object::Reference(pages)]));
        twice.objects.insert(pages, Object::Dictionary(tree));
        assert!(matches!(check_page_tree(&twice), Err(PdfError::Unreadable(m)) if m.contains("twice")));
        // The pages node's parent is the page's parent again: the chain loops.
        let mut looping = doc.clone();
        let mut tree = looping.get_dictionary(pages).unwrap().clone();
        tree.set("Parent", Object::Reference(pages));
        looping.objects.insert(pages, Object::Dictionary(tree));
        assert!(matches!(check_page_tree(&looping), Err(PdfError::Unreadable(m)) if m.contains("loop")));
    }

    #[test]
    fn forms_nested_past_the_depth_are_refused() {
        let forms: Vec<(String, String)> =
            (0..=MAX_FORM_DEPTH).map(|i| (format!("N{i}"), draws(&format!("N{}", i + 1), 1))).collect();
        let forms: Vec<(&str, &str)> = forms.iter().map(|(n, c)| (n.as_str(), c.as_str())).collect();
        let doc = document(&draws("N0", 1), &forms);
        assert!(matches!(interpreted_size(&doc, u64::MAX), Err(PdfError::Unreadable(m)) if m.contains("deeper")));
    }
}
