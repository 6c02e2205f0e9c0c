//! Checks the module map of `lib.rs`: every module uses only modules of its own layer or of the
//! layers below it. A module added to the addon must be placed in a layer here.

/// The layers, bottom first: the rank of a module is the index of its layer.
const LAYERS: &[&[&str]] = &[
  &["errors", "facts"],
  &["js_memory"],
  &["layout"],
  &["storage"],
  &["handle"],
  &["own_capsule"],
  &["cuda"],
  &["ops"],
  &["binding", "exchange"],
];

/// Every source file of the addon, by the top-level module it belongs to.
const SOURCES: &[(&str, &str, &str)] = &[
  ("binding", "binding/mod.rs", include_str!("binding/mod.rs")),
  (
    "binding",
    "binding/convert.rs",
    include_str!("binding/convert.rs"),
  ),
  (
    "binding",
    "binding/cuda.rs",
    include_str!("binding/cuda.rs"),
  ),
  (
    "binding",
    "binding/fast.rs",
    include_str!("binding/fast.rs"),
  ),
  (
    "binding",
    "binding/tensor.rs",
    include_str!("binding/tensor.rs"),
  ),
  (
    "binding",
    "binding/transfer.rs",
    include_str!("binding/transfer.rs"),
  ),
  ("exchange", "exchange.rs", include_str!("exchange.rs")),
  ("ops", "ops/mod.rs", include_str!("ops/mod.rs")),
  ("ops", "ops/convert.rs", include_str!("ops/convert.rs")),
  ("ops", "ops/copy.rs", include_str!("ops/copy.rs")),
  ("ops", "ops/export.rs", include_str!("ops/export.rs")),
  ("ops", "ops/import.rs", include_str!("ops/import.rs")),
  (
    "ops",
    "ops/negotiation.rs",
    include_str!("ops/negotiation.rs"),
  ),
  ("ops", "ops/view.rs", include_str!("ops/view.rs")),
  ("ops", "ops/transfer.rs", include_str!("ops/transfer.rs")),
  ("cuda", "cuda.rs", include_str!("cuda.rs")),
  (
    "own_capsule",
    "own_capsule.rs",
    include_str!("own_capsule.rs"),
  ),
  ("handle", "handle.rs", include_str!("handle.rs")),
  ("storage", "storage.rs", include_str!("storage.rs")),
  ("layout", "layout.rs", include_str!("layout.rs")),
  ("js_memory", "js_memory.rs", include_str!("js_memory.rs")),
  ("errors", "errors.rs", include_str!("errors.rs")),
  ("facts", "facts.rs", include_str!("facts.rs")),
];

fn rank(module: &str) -> Option<usize> {
  LAYERS.iter().position(|layer| layer.contains(&module))
}

fn identifier(text: &str) -> &str {
  let end = text
    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
    .unwrap_or(text.len());
  &text[..end]
}

/// The top-level modules `source` names through `crate::` (in paths and `use` groups).
fn crate_modules(source: &str) -> Vec<&str> {
  let mut found = Vec::new();
  for (at, _) in source.match_indices("crate::") {
    let rest = &source[at + "crate::".len()..];
    if let Some(group) = rest.strip_prefix('{') {
      // `use crate::{a::x, b}`: the names at the group's first level.
      let mut depth = 0;
      let mut start = true;
      for (index, c) in group.char_indices() {
        match c {
          '{' => depth += 1,
          '}' if depth == 0 => break,
          '}' => depth -= 1,
          ',' if depth == 0 => start = true,
          c if start && !c.is_whitespace() => {
            found.push(identifier(&group[index..]));
            start = false;
          }
          _ => {}
        }
      }
    } else {
      found.push(identifier(rest));
    }
  }
  found
}

#[test]
fn layering_is_one_way() {
  let mut violations = Vec::new();
  for &(module, file, source) in SOURCES {
    let own = rank(module).expect("every source's module has a layer");
    for used in crate_modules(source) {
      match rank(used) {
        Some(used_rank) if used_rank <= own => {}
        Some(_) => violations.push(format!("{file} uses `{used}`, a higher layer")),
        None => violations.push(format!("{file} uses `{used}`, which has no layer")),
      }
    }
  }
  assert!(violations.is_empty(), "{violations:#?}");
}

#[test]
fn every_module_has_a_layer_and_its_sources_are_checked() {
  let lib = include_str!("lib.rs");
  for line in lib.lines() {
    let Some(name) = line
      .strip_prefix("mod ")
      .map(|rest| rest.trim_end_matches(';'))
    else {
      continue;
    };
    if name == "layering" {
      continue;
    }
    assert!(rank(name).is_some(), "module `{name}` is in no layer");
    assert!(
      SOURCES.iter().any(|&(module, _, _)| module == name),
      "no source of module `{name}` is checked"
    );
  }
}

#[test]
fn the_check_sees_every_form_of_use() {
  let source = "use crate::errors::fail;\nuse crate::{handle::Handle, js_memory};\n\
                let x = crate::cuda::device_of(y);\n";
  assert_eq!(
    crate_modules(source),
    ["errors", "handle", "js_memory", "cuda"]
  );
  // A lower layer naming a higher one is caught.
  assert!(rank("cuda") > rank("storage"));
}
