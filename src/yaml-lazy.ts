/**
 * The `yaml` package, loaded the first time it is needed rather than with
 * the module graph: importing it took ~70-100 ms on this project's VM
 * (`node -e "await import('yaml')"` against `node -e 1`), and most command-line runs — an unchanged rescan, a
 * receipt, a lookup — never parse or write YAML. Types come from
 * `import type`, which costs nothing at run time.
 */
import { createRequire } from 'node:module';

type Yaml = typeof import('yaml');

const require = createRequire(import.meta.url);
let loaded: Yaml | undefined;

export function yaml(): Yaml {
  return (loaded ??= require('yaml') as Yaml);
}
