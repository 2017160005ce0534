// The build compiles TypeScript to dist/; the pages' static assets are copied beside it.
import { cpSync } from 'node:fs';

cpSync('src/web/assets', 'dist/src/web/assets', { recursive: true });
