import { Type } from 'typebox';
import type { AppContext } from '../context.js';
import type { App } from '../http/types.js';

const CategoryList = Type.Array(Type.Object({ categoryId: Type.String(), name: Type.String(), mcc: Type.String() }));

export function registerCategoryRoutes(app: App, ctx: AppContext): void {
  app.get(
    '/api/v1/categories',
    { schema: { tags: ['Points of sale'], summary: 'Merchant categories (ISO 18245 MCC); no auth', response: { 200: CategoryList } } },
    async () => {
      const rows = await ctx.store.db.selectFrom('categories').selectAll().orderBy('mcc').execute();
      return rows.map((c) => ({ categoryId: c.id, name: c.name, mcc: c.mcc }));
    },
  );
}
