//! PDFs built for the tests of the PDF reader's bounds.

use std::io::Write;

use flate2::{Compression, write::ZlibEncoder};
use pdf_extract::{Dictionary, Document, Object, Stream};

/// `data` zlib-compressed, as a `FlateDecode` stream holds it.
pub(super) fn zlib(data: &[u8]) -> Vec<u8> {
    let mut encoder = ZlibEncoder::new(Vec::new(), Compression::best());
    encoder.write_all(data).expect("compresses");
    encoder.finish().expect("compresses")
}

/// A stream of `content` compressed with `FlateDecode`.
pub(super) fn flate_stream(content: &[u8]) -> Stream {
    let mut dict = Dictionary::new();
    dict.set("Filter", Object::Name(b"FlateDecode".to_vec()));
    Stream::new(dict, zlib(content))
}

/// A document of one page whose content is `contents`, with the forms `forms` (name, content) in one
/// resources dictionary that the page inherits from the page tree (as many writers put it) and the
/// forms share.
pub(super) fn one_page(contents: Stream, forms: &[(&str, &str)]) -> Document {
    let mut doc = Document::with_version("1.5");
    let resources_id = doc.new_object_id();
    let mut xobjects = Dictionary::new();
    for (name, content) in forms {
        let mut dict = Dictionary::new();
        dict.set("Subtype", Object::Name(b"Form".to_vec()));
        let id = doc.add_object(Object::Stream(Stream::new(dict, content.as_bytes().to_vec())));
        xobjects.set(*name, Object::Reference(id));
    }
    let mut resources = Dictionary::new();
    resources.set("XObject", Object::Dictionary(xobjects));
    doc.objects.insert(resources_id, Object::Dictionary(resources));
    let contents = doc.add_object(Object::Stream(contents));
    let pages = doc.new_object_id();
    let mut page = Dictionary::new();
    page.set("Type", Object::Name(b"Page".to_vec()));
    page.set("Parent", Object::Reference(pages));
    page.set("Contents", Object::Reference(contents));
    page.set("MediaBox", Object::Array([0, 0, 612, 792].map(Object::Integer).to_vec()));
    let page = doc.add_object(Object::Dictionary(page));
    let mut tree = Dictionary::new();
    tree.set("Type", Object::Name(b"Pages".to_vec()));
    tree.set("Kids", Object::Array(vec![Object::Reference(page)]));
    tree.set("Count", Object::Integer(1));
    tree.set("Resources", Object::Reference(resources_id));
    doc.objects.insert(pages, Object::Dictionary(tree));
    let mut catalog = Dictionary::new();
    catalog.set("Type", Object::Name(b"Catalog".to_vec()));
    catalog.set("Pages", Object::Reference(pages));
    let catalog = doc.add_object(Object::Dictionary(catalog));
    doc.trailer.set("Root", Object::Reference(catalog));
    doc
}
