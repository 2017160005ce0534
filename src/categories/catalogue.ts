/**
 * Merchant categories, seeded with real ISO 18245 merchant category codes (MCC).
 * The ids are fixed (UUID v5-style, derived once from the MCC) so that merchants can
 * hard-code them in every environment; never change an id once published.
 */
export interface Category {
  id: string;
  mcc: string;
  name: string;
}

export const CATEGORIES: readonly Category[] = [
  { id: '134a3105-73c3-50da-bf62-14670019ccda', mcc: '5411', name: 'Grocery Stores, Supermarkets' },
  { id: '443e0f7d-ef2b-5796-9dd7-c5e56f2d6fa7', mcc: '5812', name: 'Eating Places, Restaurants' },
  { id: 'f6c1104e-21b2-5a3e-9e34-40dfc29870ec', mcc: '5814', name: 'Fast Food Restaurants' },
  { id: '73a98479-0cb0-59b5-9a2f-3488b32a518c', mcc: '5462', name: 'Bakeries' },
  { id: 'fe0f5a7d-e907-516e-bc7a-0f99b7a44bf2', mcc: '5499', name: 'Convenience Stores and Specialty Food Markets' },
  { id: 'b373f102-73de-51e6-86b2-db553af47a55', mcc: '5912', name: 'Drug Stores and Pharmacies' },
  { id: 'f210462a-349d-5b40-8935-1e284796aba7', mcc: '5541', name: 'Service Stations' },
  { id: '3d3f8176-ddf2-508d-93e5-0b95f939e605', mcc: '5311', name: 'Department Stores' },
  { id: 'd2295f51-a069-51f2-862a-6651bba5ebbc', mcc: '5651', name: 'Family Clothing Stores' },
  { id: '5171ec15-fe53-53dc-881e-643c7a179eb1', mcc: '5732', name: 'Electronics Stores' },
  { id: 'b16bd5c4-922a-581c-a7ce-ee4548b40f6a', mcc: '5045', name: 'Computers, Peripherals and Software' },
  { id: 'd1746072-7e74-5e04-9a71-c97e1ae395fa', mcc: '4812', name: 'Telecommunication Equipment and Telephone Sales' },
  { id: '6830e59e-f549-5a15-8144-5d0db0021adc', mcc: '4814', name: 'Telecommunication Services' },
  { id: 'bad28bb6-a30e-565e-a356-6f54d1cd1e1e', mcc: '4111', name: 'Local and Suburban Commuter Transport' },
  { id: '0b422c75-cf10-5251-b4d9-2150603fb265', mcc: '4121', name: 'Taxicabs and Limousines' },
  { id: 'fc4cb590-d983-5e53-bb4d-7953ed76c533', mcc: '4900', name: 'Utilities: Electric, Gas, Water, Sanitary' },
  { id: '10cba7b1-bf55-566c-a70e-30cb455f2d20', mcc: '5200', name: 'Home Supply Warehouse Stores' },
  { id: 'e57c241b-4b10-5597-99b5-6aab24d4ee18', mcc: '5251', name: 'Hardware Stores' },
  { id: 'aa4a60e1-bc1d-50ee-8276-ad7463809d51', mcc: '5999', name: 'Miscellaneous and Specialty Retail Stores' },
  { id: '4cd187eb-9a02-597a-95cd-ef693029ce50', mcc: '7011', name: 'Hotels, Motels and Resorts' },
  { id: 'a052b7a3-3093-5fc6-8e4b-f64358cc4430', mcc: '7230', name: 'Beauty and Barber Shops' },
  { id: '439f841d-919f-53c9-8f0c-4a776be96a1a', mcc: '7542', name: 'Car Washes' },
  { id: 'f0da6aae-698e-5181-844f-1f795983a264', mcc: '7832', name: 'Motion Picture Theaters' },
  { id: '41c25cb3-e4ad-538f-a33e-88d3b3b3f977', mcc: '8011', name: 'Doctors and Physicians' },
  { id: 'f93d3590-8c07-5f80-9dca-70423b88f206', mcc: '8062', name: 'Hospitals' },
  { id: '181e5388-3447-58f4-91f0-94ee37683d9e', mcc: '8211', name: 'Elementary and Secondary Schools' },
  { id: '53cf1ad1-f1a2-5268-83a1-b2b50029b299', mcc: '8220', name: 'Colleges and Universities' },
  { id: '11a47038-4f85-5dfb-b284-f383231c6024', mcc: '8398', name: 'Charitable and Social Service Organizations' },
  { id: '807741f9-5670-54eb-97e3-d061510e45b0', mcc: '9399', name: 'Government Services' },
];
