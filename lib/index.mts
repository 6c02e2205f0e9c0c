// The ESM entry: the CommonJS build re-exported, so `import` and `require` share one module
// instance (one addon, one set of classes: `instanceof` holds across both).
export * from './index.js'
